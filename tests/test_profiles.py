"""The Snakemake profiles (profiles/local, profiles/slurm): they load, their resource expressions grow with
``attempt``, and a retried job really gets the larger memory.

The real Slurm run is .ci/slurm/run_example.sh (a one-node cluster, see .ci/slurm/start.sh)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SNAKEMAKE = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or shutil.which("snakemake")
pytestmark = pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake is not installed")


def _profile(root, name):
    return yaml.safe_load((root / "profiles" / name / "config.yaml").read_text())


def _evaluate(expression, attempt):
    """As Snakemake evaluates a resource given as a string: a Python expression with `attempt` bound."""
    return eval(str(expression), {"attempt": attempt})  # noqa: S307 (profile text under our control)


@pytest.mark.parametrize("name", ["local", "slurm"])
def test_memory_and_runtime_grow_with_attempt(root, name):
    profile = _profile(root, name)
    resources = {"(default)": profile["default-resources"], **profile.get("set-resources", {})}
    for rule, values in resources.items():
        for key in ("mem_mb", "runtime"):
            if key in values:
                first, second, third = (_evaluate(values[key], a) for a in (1, 2, 3))
                assert 0 < first < second < third, (rule, key)
    assert profile["retries"] >= 1 and profile["rerun-incomplete"] is True


def test_slurm_profile_asks_a_gpu_for_inference_and_groups_small_jobs(root):
    profile = _profile(root, "slurm")
    assert profile["executor"] == "slurm"
    assert profile["set-resources"]["predict"]["gpu"] == 1
    for rule, values in profile["set-resources"].items():
        if "cpus_per_task" in values:   # cpus_per_task and threads agree, so the job gets what it uses
            assert profile["set-threads"][rule] == values["cpus_per_task"], rule
    chunk_rule = (root / "rules" / "chunks.smk").read_text()
    assert 'group:\n        "chunking"' in chunk_rule and profile["group-components"]["chunking"] > 1


def test_retry_gets_more_memory_through_the_local_profile(root, tmp_path):
    """A job that fails on its first attempt is retried with set-resources evaluated at attempt 2."""
    (tmp_path / "Snakefile").write_text(
        'rule db_build:\n'
        '    output: "mem.txt"\n'
        '    resources: mem_mb=1\n'
        '    shell: "echo {resources.mem_mb} >> attempts.txt; '
        'test $(wc -l < attempts.txt) -ge 2 && echo {resources.mem_mb} > {output}"\n')
    result = subprocess.run([SNAKEMAKE, "--profile", str(root / "profiles" / "local"), "--cores", "1"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    expected = [_evaluate(_profile(root, "local")["set-resources"]["db_build"]["mem_mb"], a) for a in (1, 2)]
    assert (tmp_path / "attempts.txt").read_text().split() == [str(v) for v in expected]
    assert (tmp_path / "mem.txt").read_text().strip() == str(expected[1])


def _dry_run(root, tmp_path, profile, env=None):
    config = {"results": str(tmp_path / "results"),
              "proteomes": {"eco": str(root / "example" / "proteomes" / "ecoli_slice.fasta")},
              "databases": {"db": {"fasta": [str(root / "example" / "db" / "sprot_firmicutes_slice.fasta.gz")]}},
              "chunks": {"proteins_per_chunk": 3}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    return subprocess.run([SNAKEMAKE, "-s", str(root / "Snakefile"), "-d", str(tmp_path), "-n", "--profile",
                           str(root / "profiles" / profile), "--configfile", str(tmp_path / "config.yaml")],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


def test_local_profile_dry_run(root, tmp_path):
    result = _dry_run(root, tmp_path, "local")
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^chunk_fasta\s+2$", result.stdout, re.MULTILINE)


@pytest.mark.skipif(importlib.util.find_spec("snakemake_executor_plugin_slurm") is None,
                    reason="snakemake-executor-plugin-slurm is not installed (extra 'slurm')")
def test_slurm_profile_dry_run(root, tmp_path):
    result = _dry_run(root, tmp_path, "slurm")
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^chunk_fasta\s+2$", result.stdout, re.MULTILINE)


@pytest.mark.parametrize("name", ["local", "slurm"])
def test_profile_rule_names_are_real_rules(root, name):
    """Snakemake silently ignores unknown names in set-threads / set-resources / groups: catch typos here."""
    import re
    rules = {m.group(1) for path in (root / "rules").glob("*.smk")
             for m in re.finditer(r"^\s*rule (\w+):", path.read_text(), re.M)}   # rules in if blocks too
    profile = yaml.safe_load((root / "profiles" / name / "config.yaml").read_text())
    for section in ("set-threads", "set-resources", "groups"):
        unknown = set(profile.get(section) or {}) - rules
        assert not unknown, f"profiles/{name} {section}: {sorted(unknown)} are not rules"
