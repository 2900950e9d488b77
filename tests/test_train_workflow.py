"""The training workflow (rules/train.smk): settings, batch glue, dry run, lint, a tiny real run with a
resumed training job, and the generated model card."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from workflow_lib.errors import InputError
from workflow_lib.schemas.io import read_frame
from workflow_lib.schemas.search import MSA_STATS
from workflow_lib.schemas.training import TRAINING_CHAINS, TRAINING_METRICS
from workflow_lib.training.jobs import chain_batches
from workflow_lib.training.config import TrainConfig, training_model_config
from workflow_lib.workflow.config import TrainWorkflowConfig

SNAKEMAKE = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or shutil.which("snakemake")
needs_snakemake = pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake is not installed")
ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def _snakemake(root, workdir, *args, check=True):
    result = subprocess.run([SNAKEMAKE, "-s", str(root / "Snakefile"), "-d", str(workdir), *args],
                            capture_output=True, text=True, timeout=600, env=ENV, cwd=workdir)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def _trackfold(*args, cwd=None):
    result = subprocess.run([sys.executable, "-m", "workflow_lib", *args], capture_output=True, text=True,
                            timeout=300, cwd=cwd, env=ENV)
    return result


def _cli(capsys, *args):
    """``trackfold ARGS`` in this process: (exit status, stderr)."""
    from workflow_lib.cli import main

    capsys.readouterr()
    status = main(list(args))
    return status, capsys.readouterr().err


def _job_counts(output):
    table = output.split("Job stats:")[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}


# ------------------------------------------------------------------------------------------------- settings
def test_schema_defaults_match_the_dataclass_and_trackfold_train(root):
    schema = yaml.safe_load((root / "config" / "schema.yaml").read_text())["properties"]["train"]["properties"]
    defaults = TrainWorkflowConfig()
    for field in dataclasses.fields(TrainWorkflowConfig):
        value = schema[field.name].get("default")
        expected = getattr(defaults, field.name)
        if field.name in ("structures", "msa_dir"):
            value = tuple(value)
        if field.name == "overrides":
            value = value or None
        assert value == expected, field.name
    library = TrainConfig(model=training_model_config("tiny").to_dict())
    for field in dataclasses.fields(TrainConfig):
        if field.name not in ("model", "loss_weights"):
            assert getattr(defaults, field.name) == getattr(library, field.name), field.name



def test_schema_defaults_match_trackfold_train_data_and_train_pack(root):
    """``trackfold train-data``, ``train-pack`` and ``train`` by hand (and the library functions behind them)
    split, pack and train as the training workflow's rules do with the schema's defaults."""
    import argparse
    import inspect

    from workflow_lib.training import cli as training_cli
    from workflow_lib.training.data import prepare_training_data
    from workflow_lib.training.pack import build_pack

    parser = argparse.ArgumentParser()
    training_cli.register(parser.add_subparsers())
    data = vars(parser.parse_args(["train-data", "--out-dir", "data", "x.pdb"]))
    pack = vars(parser.parse_args(["train-pack", "--chains", "c.parquet", "--msa-dir", "a3m", "--out", "p.npz"]))
    train = vars(parser.parse_args(["train", "--out-dir", "run"]))
    schema = yaml.safe_load((root / "config" / "schema.yaml").read_text())["properties"]["train"]["properties"]
    defaults = TrainWorkflowConfig()
    prepare = inspect.signature(prepare_training_data).parameters
    for key, option in (("min_length", "min_length"), ("max_length", "max_length"), ("identity", "identity"),
                        ("val_fraction", "val_fraction"), ("split_seed", "seed"), ("data_threads", "cpus")):
        assert schema[key]["default"] == getattr(defaults, key) == data[option] == prepare[option].default, key
    assert schema["pack_max_rows"]["default"] == defaults.pack_max_rows == pack["max_rows"]
    assert inspect.signature(build_pack).parameters["max_rows"].default == pack["max_rows"]
    for key in ("preset", "threads", "init_model", "max_train_chains", "time_limit_min"):
        assert schema[key]["default"] == getattr(defaults, key) == train[key], key


def test_train_settings_become_trackfold_train_options():
    settings = TrainWorkflowConfig.from_dict({"structures": ["x"], "preset": "tiny", "steps": 7,
                                              "overrides": {"dropout": 0.0}, "time_limit_min": 1.5,
                                              "msa_dir": "some/dir"})
    options = settings.train_options()
    assert "--preset tiny" in options and "--steps 7" in options and "--time-limit-min 1.5" in options
    assert "--set dropout=0.0" in options and "--max-train-chains" not in options
    assert settings.msa_dir == ("some/dir",) and settings.precomputed_option() == "--precomputed some/dir"
    assert settings.targets("res")[0] == "res/train/model/MODEL_CARD.md"
    with pytest.raises(InputError, match="stepz"):
        TrainWorkflowConfig.from_dict({"structures": ["x"], "stepz": 3})
    with pytest.raises(InputError, match="device"):
        TrainWorkflowConfig.from_dict({"structures": ["x"], "device": "tpu"})
    with pytest.raises(InputError, match="structures"):
        TrainWorkflowConfig.from_dict({}).structure_files()


def test_split_options_reach_train_data():
    drawn = TrainWorkflowConfig.from_dict({"structures": ["x"], "chain_names": "names.txt", "val_chains": 320})
    assert "--names names.txt" in drawn.data_options() and "--val-chains 320" in drawn.data_options()
    assert "--val-names" not in drawn.data_options()
    fixed = TrainWorkflowConfig.from_dict({"structures": ["x"], "val_names": "val names.txt"})
    assert "--val-names 'val names.txt'" in fixed.data_options() and "--val-chains" not in fixed.data_options()
    with pytest.raises(InputError, match="not both"):
        TrainWorkflowConfig.from_dict({"structures": ["x"], "val_chains": 3, "val_names": "v.txt"})
    with pytest.raises(InputError, match="pack"):
        TrainWorkflowConfig.from_dict({"structures": ["x"], "templates": True})


# ------------------------------------------------------------------------------------------- batch glue
@pytest.fixture(scope="module")
def chains_table(tmp_path_factory, root):
    """chains.parquet of five bundled Docking Benchmark structures (real chains, trackfold train-data)."""
    from workflow_lib.training.data import prepare_training_data

    out = tmp_path_factory.mktemp("train_data")
    prepare_training_data(sorted((root / "example" / "templates" / "structures").glob("1*"))[:5], out)
    return out / "chains.parquet"


def test_batches_partition_the_chains(chains_table, tmp_path, capsys):
    table = read_frame(chains_table, TRAINING_CHAINS)
    seen = []
    for batch in range(3):
        fasta = tmp_path / f"b{batch}.fasta"
        status, err = _cli(capsys, "train-batch", "--chains", str(chains_table), "--batch", f"{batch:03d}",
                           "--batches", "3", "--fasta", str(fasta), "--out-dir", str(tmp_path / f"b{batch}"))
        assert status == 0, err
        names = [line[1:].strip() for line in fasta.read_text().splitlines() if line.startswith(">")]
        assert names == list(table["name"][chain_batches(len(table), 3) == batch])
        seen += names
    assert sorted(seen) == sorted(table["name"])
    empty = tmp_path / "b9"
    status, _ = _cli(capsys, "train-batch", "--chains", str(chains_table), "--batch", "9", "--batches", "10",
                     "--fasta", str(tmp_path / "b9.fasta"), "--out-dir", str(empty))
    assert status == 0 and (tmp_path / "b9.fasta").read_text() == ""
    assert read_frame(empty / "msa_stats.parquet", MSA_STATS).empty     # nothing to search: done already


def test_train_select_lists_one_splits_a3ms(chains_table, tmp_path, capsys):
    table = read_frame(chains_table, TRAINING_CHAINS)
    validation = set(table.loc[table["split"] == "validation", "name"])
    assert validation and len(validation) < len(table)
    folder = tmp_path / "batch"
    folder.mkdir()
    for row in table.itertuples():
        (folder / f"{row.name}.a3m").write_text(f">{row.name}\n{row.sequence}\n")
    missing = sorted(validation)[0]
    (folder / f"{missing}.a3m").unlink()                    # a chain without an A3M is not listed
    listed = {}
    for split in ("all", "validation", "train"):
        out = tmp_path / f"{split}.txt"
        status, err = _cli(capsys, "train-select", "--chains", str(chains_table), "--msa-dir", str(folder),
                           "--split", split, "--out", str(out))
        assert status == 0, err
        listed[split] = {Path(line).stem for line in out.read_text().splitlines()}
    assert listed["validation"] == validation - {missing}
    assert listed["train"] == set(table["name"]) - validation
    assert listed["all"] == set(table["name"]) - {missing}


def test_train_hits_keeps_what_a_pack_keeps_and_names_missing_hits(chains_table, tmp_path, capsys):
    from workflow_lib.schemas.io import write_table
    from workflow_lib.schemas.templates import TEMPLATE_HITS

    table = read_frame(chains_table, TRAINING_CHAINS)
    names = list(table["name"])
    validation = set(table.loc[table["split"] == "validation", "name"])
    training = [n for n in names if n not in validation]
    hits_dir = tmp_path / "hits"
    hits_dir.mkdir()
    columns = {field.name: [] for field in TEMPLATE_HITS.schema}
    candidates = [(names[0], 1.0), (training[-1], 0.5), (sorted(validation)[0], 0.4), ("9XYZ_A", 0.95),
                  ("8ABC_B", 0.3)]
    for rank, (template, identity) in enumerate(candidates, start=1):
        row = {"query": names[0], "template": template, "rank": rank, "evalue": 1e-5 * rank, "pvalue": 1e-9,
               "significance": 0.99, "bitscore": 50.0, "identity": identity, "similarity": identity,
               "aligned_cols": 50, "qstart": 1, "qend": 50, "tstart": 1, "tend": 50, "qlen": 60, "tlen": 60,
               "alignment": "M" * 50, "template_db": "db", "db_size": 100, "null_lambda": 0.3, "null_mu": 5.0}
        for key, value in row.items():
            columns[key].append(value)
    write_table(hits_dir / f"{names[0]}.hits.parquet", pd.DataFrame(columns), TEMPLATE_HITS)
    a3ms = tmp_path / "list.txt"
    a3ms.write_text(f"msa/{names[0]}.a3m\n")
    status, err = _cli(capsys, "train-hits", "--chains", str(chains_table), "--hits", str(hits_dir),
                       "--a3m-list", str(a3ms), "--out-dir", str(tmp_path / "usable"))
    assert status == 0, err
    kept = list(pd.read_parquet(tmp_path / "usable" / f"{names[0]}.hits.parquet")["template"])
    expected = [training[-1]] if training[-1] != names[0] else []        # not itself, not above 90% identity
    if names[0] in validation:
        expected.append(sorted(validation)[0])                            # a held-out chain may use another
    assert kept == expected + ["8ABC_B"]
    a3ms.write_text(f"msa/{names[1]}.a3m\n")
    status, err = _cli(capsys, "train-hits", "--chains", str(chains_table), "--hits", str(hits_dir),
                       "--a3m-list", str(a3ms), "--out-dir", str(tmp_path / "usable"))
    assert status != 0 and "no template hits" in err and names[1] in err
    a3ms.write_text("msa/NOT_A_CHAIN.a3m\n")
    status, err = _cli(capsys, "train-hits", "--chains", str(chains_table), "--hits", str(hits_dir),
                       "--a3m-list", str(a3ms), "--out-dir", str(tmp_path / "usable"))
    assert status != 0 and "not a chain of the training table" in err


def test_precomputed_msas_are_checked_and_copied(chains_table, tmp_path, capsys):
    table = read_frame(chains_table, TRAINING_CHAINS)
    first, second = tmp_path / "pre_a", tmp_path / "pre_b"
    first.mkdir()
    second.mkdir()
    for k, row in enumerate(table.itertuples()):
        directory = first if k % 2 == 0 else second      # spread over two directories, found through a glob
        directory.joinpath(f"{row.name}.a3m").write_text(f">{row.name}\n{row.sequence}\n>hom\n{row.sequence}\n")
    out = tmp_path / "batch"
    args = ["train-batch", "--chains", str(chains_table), "--batch", "0", "--batches", "1",
            "--fasta", str(tmp_path / "q.fasta"), "--out-dir", str(out)]
    stale = out / "not_a_chain.a3m"
    out.mkdir()
    stale.write_text(">x\nACD\n")
    status, err = _cli(capsys, *args, "--precomputed", str(tmp_path / "pre_*"))
    assert status == 0, err
    stats = read_frame(out / "msa_stats.parquet", MSA_STATS)
    assert sorted(stats["safe_id"]) == sorted(table["name"]) and set(stats["source"]) == {"precomputed"}
    assert (stats["depth"] == 2).all() and (tmp_path / "q.fasta").read_text() == "" and not stale.exists()
    # a query row that is not the chain's sequence is refused, naming the file
    name, sequence = table["name"][0], table["sequence"][0]
    (first / f"{name}.a3m").write_text(f">{name}\n{sequence[:-1]}\n")
    status, err = _cli(capsys, *args, "--precomputed", str(first), str(second))
    assert status == 2 and f"{name}.a3m" in err and "first row" in err
    status, err = _cli(capsys, *args, "--precomputed", str(second))
    assert status == 2 and "no precomputed" in err


def test_train_device_option(capsys):
    import torch

    from workflow_lib.training.loop import training_device

    with pytest.raises(SystemExit):
        _cli(capsys, "train", "--help")
    assert "--device" in capsys.readouterr().out
    assert training_device("cpu").type == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="CUDA"):
            training_device("cuda")
        assert training_device("auto").type == "cpu"
    else:
        assert training_device("auto").type == "cuda"


# --------------------------------------------------------------------------------------------- workflow
@needs_snakemake
def test_the_training_runs_evaluation_predicts_with_every_setting_of_the_predict_rule(root, tmp_path):
    """train_predict folds the validation chains as the proteome's predict rule would: every option of the predict
    rule that changes a structure is on its command line too (with the config's values)."""
    result = _snakemake(root, root, "-n", "-p", "--configfile", str(root / "config" / "train_ci.yaml"),
                        "--config", f"results={tmp_path / 'results'}", "--until", "train_predict")
    line = next(line for line in result.stdout.splitlines() if " predict --model " in line)
    for option in ("--window", "--seed", "--max-msa", "--fold", "--precision", "--crop-pairs", "--template-weight"):
        assert f" {option} " in line, option


@needs_snakemake
def test_dry_run_lists_the_training_jobs(root, tmp_path):
    result = _snakemake(root, root, "-n", "--configfile", str(root / "config" / "train_ci.yaml"),
                        "--config", f"results={tmp_path / 'results'}")
    expected = {"db_build": 1, "train_data": 1, "train_msa": 2, "train_features": 2, "train_model": 1,
                "train_predict": 1, "train_evaluate": 1, "train_card": 1, "all": 1}
    assert _job_counts(result.stdout) == {**expected, "total": sum(expected.values())}
    # from a pack: one train_pack job more, the same jobs otherwise (feature jobs build validation chains only)
    override = tmp_path / "pack.yaml"
    override.write_text(yaml.safe_dump({"train": {"pack": True}}))
    result = _snakemake(root, root, "-n", "--configfile", str(root / "config" / "train_ci.yaml"), str(override),
                        "--config", f"results={tmp_path / 'results'}")
    assert _job_counts(result.stdout) == {**expected, "train_pack": 1, "total": sum(expected.values()) + 1}
    # with template hits in the pack: the template database (profiles by our search) and one search per batch
    override.write_text(yaml.safe_dump({"train": {"pack": True, "templates": True}}))
    result = _snakemake(root, root, "-n", "--configfile", str(root / "config" / "train_ci.yaml"), str(override),
                        "--config", f"results={tmp_path / 'results'}")
    more = {"train_pack": 1, "train_templates": 2, "template_msas": 1, "templates_build": 1}
    assert _job_counts(result.stdout) == {**expected, **more, "total": sum(expected.values()) + sum(more.values())}
    # precomputed MSAs: no database is built, the batches copy and check A3Ms instead
    override = tmp_path / "precomputed.yaml"
    override.write_text(yaml.safe_dump({"train": {"msa_dir": [str(tmp_path / "msas_*")]}}))
    result = _snakemake(root, root, "-n", "--configfile", str(root / "config" / "train_ci.yaml"), str(override),
                        "--config", f"results={tmp_path / 'results'}")
    del expected["db_build"]
    assert _job_counts(result.stdout) == {**expected, "total": sum(expected.values())}
    # the real configuration (its data lives in ../shared/data): the archive is extracted by a rule, 14 batches
    if not (root.parent / "shared" / "data" / "docking_benchmark5.5_unbound").is_dir():
        return
    result = _snakemake(root, root, "-n", "--configfile", str(root / "config" / "train.yaml"),
                        "--config", f"results={tmp_path / 'results'}")
    counts = _job_counts(result.stdout)
    assert counts["train_structures"] == 1 and counts["train_msa"] == 14 and counts["db_build"] == 1
    # the PDB-scale configuration: 6,000 chains of the backbone archive, 30 MSA batches, template hits, one pack
    # (its UniProt FASTA is built by benchmarks/uniprot2014.py: the bundled Swiss-Prot slice stands in)
    if not (root.parent / "shared" / "data" / "pdb_chains_promod3" / "backbone.npz").is_file():
        return
    override = tmp_path / "small_db.yaml"
    override.write_text(yaml.safe_dump({"databases": {"uniprot": {
        "fasta": [str(root / "example" / "db" / "sprot_firmicutes_slice.fasta.gz")], "shards": 2}}}))
    result = _snakemake(root, root, "-n", "--configfile", str(root / "config" / "train_pdb.yaml"), str(override),
                        "--config", f"results={tmp_path / 'results'}")
    counts = _job_counts(result.stdout)
    assert counts["train_msa"] == counts["train_templates"] == counts["train_features"] == 30
    assert counts["train_pack"] == counts["templates_build"] == counts["db_build"] == 1
    assert "template_msas" not in counts                               # single-sequence template profiles


@needs_snakemake
def test_lint_is_clean_with_the_training_config(root, tmp_path):
    result = _snakemake(root, root, "--lint", "--configfile", str(root / "config" / "train_ci.yaml"),
                        "--config", f"results={tmp_path / 'results'}", check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Lints for" not in result.stdout + result.stderr


def _workdir(tmp_path, root, **train):
    """A working directory like the repository root (example/ and config/ linked) and a test config over
    config/train_ci.yaml: fewer structures and steps, so the run takes well under a minute."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "example").symlink_to(root / "example")
    (work / "config").symlink_to(root / "config")
    override = {"train": {"structures": ["example/templates/structures/1*"], "steps": 8, "checkpoint_every": 2,
                          "val_every": 4, "msa_batches": 1, **train}}
    (work / "test.yaml").write_text(yaml.safe_dump(override))
    return work, ["--configfile", "config/train_ci.yaml", "test.yaml"]


@needs_snakemake
@pytest.mark.slow
def test_tiny_training_run_resumes_and_writes_a_model_card(root, tmp_path):
    work, configs = _workdir(tmp_path, root)
    run = work / "results" / "train" / "ci_tiny"
    _snakemake(root, work, "--cores", "2", *configs, "--until", "train_features")
    assert not (run / "run").exists()
    # an interrupted training job: the rule's own command and settings, stopped after step 3 (what a job killed
    # right after a checkpoint leaves behind: train_state.pt, no model.pt)
    ci = yaml.safe_load((root / "config" / "train_ci.yaml").read_text())["train"]
    settings = TrainWorkflowConfig.from_dict({**ci, **yaml.safe_load((work / "test.yaml").read_text())["train"]})
    result = _trackfold("train", "--chains", str(run / "data" / "chains.parquet"), "--features-dir",
                        str(run / "features"), "--out-dir", str(run / "run"), *settings.train_options().split(),
                        "--threads", "1", "--device", "cpu", "--stop-after", "3", cwd=work)
    assert result.returncode == 0, result.stderr
    assert (run / "run" / "train_state.pt").exists() and not (run / "run" / "model.pt").exists()

    _snakemake(root, work, "--cores", "2", *configs)
    log = (work / "logs" / "train_model" / "ci_tiny.log").read_text()
    assert "at step 3" in log and "resumed from" in log                # continued, not restarted
    metrics = read_frame(run / "run" / "metrics.parquet", TRAINING_METRICS)
    assert metrics.loc[metrics["split"] == "train", "step"].tolist() == list(range(1, 9))
    from workflow_lib.model.checkpoint import load_checkpoint
    _, extra = load_checkpoint(run / "run" / "model.pt")
    assert extra["steps"] == 8 and extra["device"] == "cpu"

    chains = read_frame(run / "data" / "chains.parquet", TRAINING_CHAINS)
    validation = chains[chains["split"] == "validation"]
    targets = pd.read_csv(run / "predictions" / "targets.tsv", sep="\t", keep_default_na=False)
    from workflow_lib.evaluate.core import TARGET_COLUMNS
    assert tuple(targets.columns) == TARGET_COLUMNS == ("name", "pred", "native", "native_chain", "pred_npz", "a3m")
    assert sorted(targets["name"]) == sorted(validation["name"])
    assert all((work / p).exists() for p in list(targets["pred"]) + list(targets["a3m"]))
    evaluation = pd.read_parquet(run / "evaluation" / "evaluation.parquet")
    assert sorted(evaluation["name"]) == sorted(validation["name"])

    card = (run / "MODEL_CARD.md").read_text()
    for heading in ("## Data", "## MSAs", "## Features", "## Training", "## Validation",
                    "## Evaluation of whole-chain predictions", "## Known limits"):
        assert heading in card
    assert f"**{len(chains)} chains**" in card and "8 of 8 planned steps" in card
    assert "`sprot_firmicutes` (3,000 sequences)" in card
    assert f"{evaluation['lddt_ca'].mean():.3f}" in card                # the evaluation's own numbers
    stats = pd.concat([read_frame(p, MSA_STATS) for p in sorted((run / "msa").glob("batch_*/msa_stats.parquet"))])
    assert sorted(stats["safe_id"]) == sorted(chains["name"])

    again = _snakemake(root, work, "-n", *configs)
    assert "Nothing to be done" in again.stdout + again.stderr          # a finished run stays finished


@needs_snakemake
@pytest.mark.slow
def test_tiny_training_run_from_a_pack(root, tmp_path):
    """train.pack with train.templates: the chains' template hits are searched and packed, the model trains from
    the pack; feature files exist for the validation chains only, and they are predicted and evaluated as
    without a pack."""
    from workflow_lib.training.pack import read_pack

    work, configs = _workdir(tmp_path, root, pack=True, pack_max_rows=8, steps=4, templates=True, max_templates=2)
    _snakemake(root, work, "--cores", "2", *configs)
    run = work / "results" / "train" / "ci_tiny"
    chains = read_frame(run / "data" / "chains.parquet", TRAINING_CHAINS)
    validation = sorted(chains.loc[chains["split"] == "validation", "name"])
    table, packed = read_pack(run / "pack" / "pack.npz")
    assert sorted(c.name for c in packed) == sorted(chains["name"])
    assert sorted(table.loc[table["split"] == "validation", "name"]) == validation
    assert max(len(c.msa) for c in packed) <= 8                  # pack_max_rows reached the pack
    hits = run / "templates" / "hits"                            # every chain searched against the templates
    assert sorted(p.name.removesuffix(".hits.parquet") for p in hits.glob("*.hits.parquet")) == sorted(chains["name"])
    clusters = dict(zip(chains["name"], chains["cluster"]))
    for name in chains["name"]:                                  # each chain's own structure is its top hit ...
        assert pd.read_parquet(hits / f"{name}.hits.parquet")["template"].iloc[0] == name
    assert any(chain.templates for chain in packed), "no chain got a template from the bundled structures"
    for chain in packed:                                         # ... and never packed, nor its cluster's chains
        for template in chain.templates:
            assert template.template != chain.name and clusters.get(template.template, -1) != clusters[chain.name]
            if chain.name not in validation:                     # no validation structure reaches training
                assert template.template not in validation
    assert sorted(p.stem for p in (run / "features").glob("*.npz")) == validation
    used = 0                                                     # held-out chains predicted with usable hits only
    for name in validation:
        usable = pd.read_parquet(run / "templates" / "usable" / f"{name}.hits.parquet")
        assert name not in set(usable["template"]) and (usable["identity"] <= 0.9).all()
        with np.load(run / "features" / f"{name}.npz") as features:
            slots = int(features["template_mask"].sum()) if "template_mask" in features else 0
        assert slots <= min(len(usable), 4)
        used += slots
    assert used > 0
    evaluation = pd.read_parquet(run / "evaluation" / "evaluation.parquet")
    assert sorted(evaluation["name"]) == validation
    from workflow_lib.model.checkpoint import load_checkpoint
    _, extra = load_checkpoint(run / "run" / "model.pt")
    assert extra["steps"] == 4
