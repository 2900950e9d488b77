"""rules/templates.smk and rules/features.smk: input functions, and a dry run for the features of one protein
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

from workflow_lib.errors import InputError
from workflow_lib.workflow.rule_inputs import StageInputs, expand_structures
from workflow_lib.workflow.config import FeatureConfig, TemplateConfig

SNAKEMAKE = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or shutil.which("snakemake")
PLAN = pd.DataFrame({"safe_id": ["b", "a", "skipped"], "chunk": [0, 1, -1]})


def test_stage_inputs(root):
    templates = TemplateConfig.from_dict({"structures": [str(root / "example/templates/structures/2q2k*"),
                                                         str(root / "example/templates/structures/3zee.cif.gz")],
                                          "msa_dir": str(root / "example/templates/msas"), "name": "tdb"})
    stage = StageInputs("res", templates, FeatureConfig.from_dict({"max_templates": 2}), {"ana": PLAN})
    assert [Path(p).name for p in stage.structures] == ["2q2k.cif.gz", "3zee.cif.gz"]
    assert [Path(p).name for p in stage.msas] == ["2q2k_A.a3m"]
    wildcards = SimpleNamespace(proteome="ana", protein="a")
    assert stage.a3m(wildcards) == stage.msa_done(wildcards) == "res/ana/msa/a.a3m"
    assert stage.template_targets("ana") == ["res/ana/templates/a.hits.parquet", "res/ana/templates/b.hits.parquet"]
    assert stage.feature_targets("ana") == ["res/ana/features/a.npz", "res/ana/features/b.npz"]
    inputs = stage.feature_inputs(wildcards)
    assert inputs == {"msa": "res/ana/msa/a.a3m", "hits": "res/ana/templates/a.hits.parquet",
                      "db": "res/templates/tdb/manifest.json"}
    options = stage.feature_template_options(wildcards, SimpleNamespace(**inputs))
    assert options == "--templates res/templates/tdb --template-hits res/ana/templates/a.hits.parquet --max-templates 2"
    lead = StageInputs("res", templates, FeatureConfig(), {"ana": PLAN}, a3m_path=lambda p, q: f"m/{p}/{q}.a3m",
                       msa_done=lambda w: f"m/{w.proteome}/chunk.stats.parquet")
    assert lead.a3m(wildcards) == "m/ana/a.a3m" and lead.msa_done(wildcards) == "m/ana/chunk.stats.parquet"
    off = StageInputs("res", TemplateConfig(), FeatureConfig(), {"ana": PLAN})
    assert off.template_targets("ana") == [] and off.feature_inputs(wildcards) == {"msa": "res/ana/msa/a.a3m"}
    assert off.feature_template_options(wildcards, SimpleNamespace()) == ""
    with pytest.raises(InputError, match="no file matches"):
        expand_structures(["/nonexistent/*.pdb"])


@pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake is not installed")
def test_dry_run_features_of_one_protein(root, tmp_path):
    results = tmp_path / "results"
    fasta = root / "example" / "proteomes" / "ecoli_slice.fasta"
    first = fasta.read_text().split("\n", 1)[0][1:].split()[0]
    from workflow_lib.seqio.fasta import safe_name

    protein = safe_name(first)
    config = {"results": str(results), "proteomes": {"eco": str(fasta)},
              "databases": {"sprot": {"fasta": [str(root / "example" / "db" / "sprot_firmicutes_slice.fasta.gz")]}},
              "templates": {"name": "tdb", "structures": [str(root / "example/templates/structures/3zee.cif.gz")]},
              "features": {"max_templates": 1}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    target = f"{results}/eco/features/{protein}.npz"
    result = subprocess.run([SNAKEMAKE, "-s", str(root / "Snakefile"), "-d", str(tmp_path), "-n", "-p", target,
                             "--configfile", str(tmp_path / "config.yaml")], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    table = result.stdout.split("Job stats:")[1]
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}
    assert {rule: counts.get(rule) for rule in ("templates_build", "template_search", "features")} == \
        {"templates_build": 1, "template_search": 1, "features": 1}
    # the A3M is read by path once the MSA stage's chunk statistics (written last) exist
    assert f"{results}/eco/msa/chunk_0000.stats.parquet" in result.stdout
    assert f"{results}/eco/msa/{protein}.a3m" in result.stdout
    assert f"--template-hits {results}/eco/templates/{protein}.hits.parquet --max-templates 1" in result.stdout
