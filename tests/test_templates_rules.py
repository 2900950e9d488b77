"""rules/templates.smk and rules/features.smk: input functions, and a dry run for the features of one chunk
(template database, template search and features jobs, after the MSA stage's chunk job)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from workflow_lib.aligner.device import compiled_available
from workflow_lib.errors import InputError
from workflow_lib.workflow.rule_inputs import StageInputs, expand_structures
from workflow_lib.workflow.config import FeatureConfig, PredictConfig, TemplateConfig

SNAKEMAKE = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or shutil.which("snakemake")
PLAN = pd.DataFrame({"safe_id": ["b", "a", "c", "skipped"], "chunk": [0, 1, 0, -1], "length": [50, 80, 700, 9000]})


def test_stage_inputs(root):
    templates = TemplateConfig.from_dict({"structures": [str(root / "example/templates/structures/2q2k*"),
                                                         str(root / "example/templates/structures/3zee.cif.gz")],
                                          "msa_dir": str(root / "example/templates/msas"), "name": "tdb"})
    stage = StageInputs("res", templates, FeatureConfig.from_dict({"max_templates": 2}), {"ana": PLAN})
    assert [Path(p).name for p in stage.structures] == ["2q2k.cif.gz", "3zee.cif.gz"]
    assert [Path(p).name for p in stage.msas] == ["2q2k_A.a3m"]
    assert stage.chunks("ana") == ["chunk_0000", "chunk_0001"]
    assert stage.chunk_proteins("ana", "chunk_0000") == ["b", "c"] and stage.longest("ana", "chunk_0000") == 700
    wildcards = SimpleNamespace(proteome="ana", chunk="0000")
    # without the MSA stage's chunk table, the chunk's A3Ms are the inputs
    assert stage.msa_done(wildcards) == ["res/ana/msa/b.a3m", "res/ana/msa/c.a3m"]
    assert stage.plan(wildcards) == "res/ana/chunks/chunks.parquet"
    assert stage.msa_dir(wildcards) == "res/ana/msa" and stage.features_dir(wildcards) == "res/ana/features"
    assert stage.template_targets("ana") == ["res/ana/templates/chunk_0000.stats.parquet",
                                             "res/ana/templates/chunk_0001.stats.parquet"]
    assert stage.feature_targets("ana") == ["res/ana/features/chunk_0000.stats.parquet",
                                            "res/ana/features/chunk_0001.stats.parquet"]
    assert stage.structure_targets("ana")[1] == "res/ana/structures/chunk_0001.stats.parquet"
    inputs = stage.feature_inputs(wildcards)
    assert inputs == {"msa": ["res/ana/msa/b.a3m", "res/ana/msa/c.a3m"],
                      "hits": "res/ana/templates/chunk_0000.stats.parquet", "db": "res/templates/tdb/manifest.json"}
    options = stage.feature_template_options(wildcards, SimpleNamespace(**inputs))
    assert options == "--templates res/templates/tdb --template-hits res/ana/templates --max-templates 2"
    lead = StageInputs("res", templates, FeatureConfig(), {"ana": PLAN},
                       msa_stats=lambda proteome, chunk: f"m/{proteome}/{chunk}.stats.parquet")
    assert lead.msa_done(wildcards) == "m/ana/chunk_0000.stats.parquet"
    off = StageInputs("res", TemplateConfig(), FeatureConfig(), {"ana": PLAN})
    assert off.template_targets("ana") == []
    assert off.feature_inputs(wildcards) == {"msa": ["res/ana/msa/b.a3m", "res/ana/msa/c.a3m"]}
    assert off.feature_template_options(wildcards, SimpleNamespace()) == ""
    with pytest.raises(InputError, match="no chunk 'chunk_0007'"):
        stage.chunk_proteins("ana", "chunk_0007")
    with pytest.raises(InputError, match="no file matches"):
        expand_structures(["/nonexistent/*.pdb"])


def test_predict_memory_and_runtime_follow_the_chunk():
    settings = PredictConfig(window=300, fold="network")
    coevolution = 2 * 1000 * 1000 * 12 // 10**6                              # the feature file's [L, L, 3]
    assert settings.memory_mb(1000) == 3000 + 1560 + coevolution and settings.memory_mb(2500) > 12000
    # no 6D maps kept
    assert PredictConfig(window=300, fold="network", pair_heads=()).memory_mb(1000) == 3000 + coevolution
    assert PredictConfig(window=300, fold="network", pair_heads=("dist",)).memory_mb(1000) == 3000 + 444 + coevolution
    # the longest protein of the Anaerococcus proteome (2,626 residues, 2 templates, folded from the distogram,
    # no 6D maps kept) peaked at 5,965 MB: the request covers it, within 3x
    longest = PredictConfig(pair_heads=()).memory_mb(2626, templates=2)
    assert 5965 < longest < 3 * 5965
    assert PredictConfig(pair_heads=()).memory_mb(2626) < longest
    batched = PredictConfig(window=300, fold="network", batch_size=16, max_tokens=1024)   # 4 proteins of 256 a pass
    assert batched.memory_mb(256) == int(3000 + 3 * 256 * 256 * 10_000 / 10**6 + 2 * 256 * 256 * 12 / 10**6)
    assert settings.memory_mb(300) < 4000
    # forward passes as crop_plan makes them: 1 within the window, one per pair of 150-residue segments beyond
    from workflow_lib.inference.stitch import crop_plan

    for length in (1, 300, 301, 450, 451, 1000, 2358):
        assert settings.network_calls(length) == len(crop_plan(length, 300)), length
    assert settings.runtime_min([100, 300, 1000]) == 10 + 2 * (1 + 1 + len(crop_plan(1000, 300)))
    small = PredictConfig(window=128, fold="network")      # a pass of 128 residues asks (128 / 300)² of 2 minutes
    assert small.runtime_min([1000]) == int(10 + 2 * (128 / 300) ** 2 * len(crop_plan(1000, 128)))
    # folding from the distogram: its float64 [L, L, 37] potential three times, and minutes growing with L²
    folding = PredictConfig(window=300, fold="distogram")
    assert folding.memory_mb(1000) == settings.memory_mb(1000) + int(3 * 1000 * 1000 * 37 * 8 / 10**6)
    per_protein = 0.05 if compiled_available() else 0.25
    assert folding.runtime_min([1000]) == int(10 + 2 * len(crop_plan(1000, 300)) + per_protein * 25)
    # no pair output kept and the structure module's backbone: only the contiguous crops run
    lean = PredictConfig(window=300, fold="network", pair_heads=())
    for length in (300, 301, 1000, 2358):
        assert lean.network_calls(length) == sum(crop.contiguous for crop in crop_plan(length, 300)), length
    assert lean.network_calls(1000) < settings.network_calls(1000)


@pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake is not installed")
def test_dry_run_features_of_one_chunk(root, tmp_path):
    results = tmp_path / "results"
    fasta = root / "example" / "proteomes" / "ecoli_slice.fasta"
    config = {"results": str(results), "proteomes": {"eco": str(fasta)},
              "databases": {"sprot": {"fasta": [str(root / "example" / "db" / "sprot_firmicutes_slice.fasta.gz")]}},
              "templates": {"name": "tdb", "structures": [str(root / "example/templates/structures/3zee.cif.gz")]},
              "features": {"max_templates": 1}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    target = f"{results}/eco/features/chunk_0000.stats.parquet"
    result = subprocess.run([SNAKEMAKE, "-s", str(root / "Snakefile"), "-d", str(tmp_path), "-n", "-p", target,
                             "--configfile", str(tmp_path / "config.yaml")], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    table = result.stdout.split("Job stats:")[1]
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}
    assert {rule: counts.get(rule) for rule in ("templates_build", "template_search", "features")} == \
        {"templates_build": 1, "template_search": 1, "features": 1}
    # the A3Ms are read by path once the MSA stage's chunk statistics (written last) exist
    assert f"{results}/eco/msa/chunk_0000.stats.parquet" in result.stdout
    assert f"--template-hits {results}/eco/templates --max-templates 1" in result.stdout
    assert f"--stats {results}/eco/templates/chunk_0000.stats.parquet" in result.stdout
    # the chunk's proteins come from the chunk table, not from a command line of every path
    assert f"--chunk-plan {results}/eco/chunks/chunks.parquet --chunk 0000 {results}/eco/msa " in result.stdout


def test_template_defaults_are_shared_by_the_library_the_schema_and_trackfold_templates(root):
    """``trackfold templates build`` / ``search`` by hand give the database and hits of the workflow's rules, and
    the library functions' defaults are the same."""
    import argparse
    import dataclasses
    import inspect

    from workflow_lib.templates import cli as templates_cli
    from workflow_lib.templates.build import build_template_db
    from workflow_lib.templates.search import search_templates

    parser = argparse.ArgumentParser()
    templates_cli.register(parser.add_subparsers())
    build = vars(parser.parse_args(["templates", "build", "--out", "db", "x.pdb"]))
    search = vars(parser.parse_args(["templates", "search", "--templates", "db", "--out-dir", "out", "q.a3m"]))
    sequences = vars(parser.parse_args(["templates", "sequences", "--out", "chains.fasta", "x.pdb"]))
    schema = yaml.safe_load((root / "config" / "schema.yaml").read_text())["properties"]["templates"]["properties"]
    config = TemplateConfig()
    assert set(schema) == {field.name for field in dataclasses.fields(TemplateConfig)}
    library = {"min_length": inspect.signature(build_template_db).parameters["min_length"].default,
               **{key: inspect.signature(search_templates).parameters[name].default
                  for key, name in (("max_hits", "max_hits"), ("min_aligned", "min_aligned"), ("decoys", "n_decoys"))}}
    cli = {"min_length": build["min_length"], "max_hits": search["max_hits"], "min_aligned": search["min_aligned"],
           "decoys": search["decoys"]}
    for name, default in library.items():
        assert schema[name]["default"] == default, name
        assert getattr(config, name) == default, name
        assert cli[name] == default, name
    assert sequences["min_length"] == build["min_length"]        # rule template_msas searches the chains it keeps
    assert schema["decoys"]["minimum"] == templates_cli.MIN_DECOYS
    for name in ("name", "structures", "msa_dir", "search_msas"):
        value = schema[name]["default"]
        assert (tuple(value) if isinstance(value, list) else value) == getattr(config, name), name
