"""One source for prediction defaults: the library, the config schema and ``trackfold predict`` agree, and the
command run by hand with no options gives the structure the workflow's predict rule gives."""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from workflow_lib.cli import main
from workflow_lib.inference import cli as predict_cli
from workflow_lib.inference.predict import PredictOptions
from workflow_lib.inference.settings import DEFAULT_MODEL, PredictSettings, default_model_path
from workflow_lib.schemas.io import read_npz
from workflow_lib.schemas.prediction import PREDICTION
from workflow_lib.workflow.config import PredictConfig

ROOT = Path(__file__).resolve().parents[1]
A3M = Path(__file__).parent / "data" / "predict" / "t1078_head64.a3m"
SNAKEMAKE = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or shutil.which("snakemake")
PER_RUN = ("--out-dir", "--stats", "--chunk-plan", "--chunk", "--threads", "--device")
"""Options of the rule's command that say where files go and what runs it, not what is predicted."""


def _cli_defaults() -> dict:
    parser = argparse.ArgumentParser()
    predict_cli.register(parser.add_subparsers())
    return vars(parser.parse_args(["predict", "x.npz", "--out-dir", "out"]))


def test_the_library_the_schema_and_the_cli_share_every_default():
    library = dataclasses.asdict(PredictSettings())
    schema = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())["properties"]["predict"]["properties"]
    cli = _cli_defaults()
    options = dataclasses.asdict(PredictOptions())
    config = dataclasses.asdict(PredictConfig())
    for name, default in library.items():
        assert options[name] == default, name
        assert config[name] == default, name
        assert cli[name] == default, name
        expected = list(default) if isinstance(default, tuple) else default
        assert schema[name]["default"] == expected, name
    assert schema["model"]["default"] == PredictConfig().model == DEFAULT_MODEL
    assert cli["model"] is None and default_model_path() == ROOT / DEFAULT_MODEL   # the shipped checkpoint
    assert library["fold"] == "distogram"          # the path with the better structures and a calibrated pLDDT


def _workflow_predict_options(tmp_path: Path) -> list[str]:
    """The options of the first ``trackfold predict`` command a dry run of the bundled example would run."""
    result = subprocess.run([SNAKEMAKE, "-n", "-p", "--nolock", "--configfile", "config/config.yaml", "--until",
                             "predict", "--config", f"results={tmp_path / 'results'}"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    if result.returncode != 0:
        raise AssertionError(f"snakemake -n failed:\n{result.stdout}\n{result.stderr}")
    line = next(line for line in result.stdout.splitlines() if " -m workflow_lib predict " in line)
    words = shlex.split(line.split(" -m workflow_lib predict ", 1)[1].split(">", 1)[0])
    options = []
    i = 0
    while i < len(words):
        if words[i] in PER_RUN:
            i += 2
        elif words[i].startswith("--"):
            options += words[i:i + 2]
            i += 2
        else:
            i += 1                                 # the features folder
    return options


@pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake is not installed")
def test_the_cli_by_hand_gives_the_workflows_structure(tmp_path, one_torch_thread):
    """The rule's command line (read from a dry run of the bundled example) and ``trackfold predict`` with no
    options give the same backbone and pLDDT, to the bit, on a real T1078 alignment."""
    workflow = _workflow_predict_options(tmp_path)
    assert "--fold" in workflow and "--model" in workflow
    model = Path(workflow[workflow.index("--model") + 1])
    workflow[workflow.index("--model") + 1] = str(ROOT / model)
    assert main(["predict", str(A3M), "--out-dir", str(tmp_path / "rule"), "--threads", "1", *workflow]) == 0
    assert main(["predict", str(A3M), "--out-dir", str(tmp_path / "hand"), "--threads", "1"]) == 0
    rule, hand = (read_npz(tmp_path / run / f"{A3M.stem}.pred.npz", PREDICTION) for run in ("rule", "hand"))
    np.testing.assert_array_equal(hand["backbone"], rule["backbone"])
    np.testing.assert_array_equal(hand["plddt"], rule["plddt"])
    assert set(hand) == set(rule)
    steps = np.linalg.norm(np.diff(hand["backbone"][:, 1], axis=0), axis=1)
    assert np.median(steps) == pytest.approx(3.80, abs=0.05)   # the default fold gives a physical chain
