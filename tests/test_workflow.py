"""The Snakemake workflow: dry runs list the expected jobs, lint is clean, a small real run completes."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from workflow_lib.schemas.db import CHUNKS
from workflow_lib.schemas.io import read_frame
from workflow_lib.seqio.fasta import read_fasta
from workflow_lib.workflow.paths import WorkflowPaths

SNAKEMAKE = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or shutil.which("snakemake")
pytestmark = pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake is not installed")


def _snakemake(root, workdir, *args, check=True):
    result = subprocess.run([SNAKEMAKE, "-s", str(root / "Snakefile"), "-d", str(workdir), *args],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def _job_counts(output):
    table = output.split("Job stats:")[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}


def _config(tmp_path, root, proteomes, per_chunk=4, shards=3, **extra):
    config = {
        "results": str(tmp_path / "results"),
        "proteomes": {name: str(root / "example" / "proteomes" / f) for name, f in proteomes.items()},
        "databases": {"sprot": {"fasta": [str(root / "example" / "db" / "sprot_firmicutes_slice.fasta.gz")],
                                "shards": shards}},
        "chunks": {"proteins_per_chunk": per_chunk},
        **extra,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_workflow_profile_spaces_snakemakes_rate_limiter_timers(root, tmp_path):
    """``profiles/default`` (loaded by every run of the workflow) sets Snakemake's job rate to its default of 100
    jobs per second over 5 s windows, in a form Snakemake parses; a dry run of the bundled example loads it."""
    from snakemake.settings.types import MaxJobsPerTimespan

    profile = yaml.safe_load((root / "profiles" / "default" / "config.yaml").read_text())
    limit = MaxJobsPerTimespan.parse_choice(profile["max-jobs-per-timespan"])
    assert limit.timespan == 5 and limit.max_jobs / limit.timespan == 100
    result = _snakemake(root, root, "-n", "--verbose", "--configfile", str(root / "config" / "config.yaml"),
                        "--config", f"results={tmp_path / 'results'}")
    assert "Using workflow specific profile" in result.stdout + result.stderr


def test_dry_run_on_the_bundled_example(root, tmp_path):
    result = _snakemake(root, root, "-n", "--configfile", str(root / "config" / "config.yaml"),
                        "--config", f"results={tmp_path / 'results'}")
    counts = _job_counts(result.stdout)
    # 35 proteins in 4 chunks, 2 shards, 3 iterations; 52 templates (their MSAs in one job); the template search,
    # features and inference one job per chunk; one summary
    expected = {"db_build": 1, "chunk_table": 1, "chunk_fasta": 4, "search_profiles": 4 * 3,
                "search_shard": 4 * 2 * 3, "msa_merge": 4 * 3, "msa_final": 4, "template_msas": 1,
                "templates_build": 1, "template_search": 4, "features": 4, "predict": 4, "summary": 1, "all": 1}
    assert counts == {**expected, "total": sum(expected.values())}


def test_dry_run_two_proteomes_lists_every_chunk(root, tmp_path):
    config = _config(tmp_path, root, {"ana": "anaerococcus_slice.fasta", "eco": "ecoli_slice.fasta"})
    counts = _job_counts(_snakemake(root, tmp_path, "-n", "--configfile", str(config)).stdout)
    # 9 + 2 chunks of at most 4 proteins, 3 shards, 3 iterations, no template stage (no structures configured)
    chunks = 9 + 2
    expected = {"db_build": 1, "chunk_table": 2, "chunk_fasta": chunks, "search_profiles": chunks * 3,
                "search_shard": chunks * 3 * 3, "msa_merge": chunks * 3, "msa_final": chunks, "features": chunks,
                "predict": chunks, "summary": 2, "all": 1}
    assert counts == {**expected, "total": sum(expected.values())}


def test_profile_database_replaces_the_sharded_search(root, tmp_path):
    config = _config(tmp_path, root, {"ana": "anaerococcus_slice.fasta"})
    data = yaml.safe_load(config.read_text())
    data["databases"]["sprot"]["profiles"] = True
    config.write_text(yaml.safe_dump(data))
    counts = _job_counts(_snakemake(root, tmp_path, "-n", "--configfile", str(config)).stdout)
    # 9 chunks, one MSA job each against the clustered database; no per-shard search jobs
    expected = {"db_build": 1, "db_cluster": 1, "chunk_table": 1, "chunk_fasta": 9, "msa_profiles": 9,
                "features": 9, "predict": 9, "summary": 1, "all": 1}
    assert counts == {**expected, "total": sum(expected.values())}
    data["search"] = {"precomputed_msas": str(tmp_path)}
    config.write_text(yaml.safe_dump(data))
    result = _snakemake(root, tmp_path, "-n", "--configfile", str(config), check=False)
    assert result.returncode != 0 and "precomputed_msas" in result.stdout + result.stderr


def test_lint_is_clean(root, tmp_path):
    result = _snakemake(root, root, "--lint", "--configfile", str(root / "config" / "config.yaml"),
                        "--config", f"results={tmp_path / 'results'}", check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Lints for" not in result.stdout + result.stderr


def test_rules_follow_the_snakemake_conventions(root):
    """No lambdas in rules (input functions live in rules/common.smk and workflow_lib.workflow); every rule
    declares log, benchmark, threads and resources; the search's per-shard intermediates are temp()."""
    rules_text = {path.name: path.read_text() for path in sorted((root / "rules").glob("*.smk"))}
    for name, text in rules_text.items():
        assert "lambda" not in text, name
        for rule in re.split(r"^\s*rule ", text, flags=re.MULTILINE)[1:]:   # rules in if blocks too
            for section in ("log:", "benchmark:", "threads:", "resources:"):
                assert re.search(rf"\n\s+{section}", rule), (name, rule.split(":")[0], section)
    search = rules_text["search.smk"]
    paths = WorkflowPaths("results")
    for method, output in (("search_queries", "queries.npz"), ("shard_hits", "shard_{shard}.hits.parquet"),
                           ("shard_times", "shard_{shard}.times.parquet")):
        assert re.search(rf"temp\(\s*PATHS\.{method}\(\)\)", search), method
        assert getattr(paths, method)().endswith(f"/iter_{{iteration}}/{output}"), method


def test_device_comes_from_resources_not_config(root, tmp_path):
    """A job runs on a GPU when it is given one (resources gpu); the old config keys stop with a clear message."""
    config = ["--configfile", str(root / "config" / "config.yaml"), "--config", f"results={tmp_path / 'results'}"]
    plain = _snakemake(root, root, "-n", "-p", *config).stdout
    assert "--device auto" not in plain and "--device numpy" in plain and "--device cpu" in plain
    given = _snakemake(root, root, "-n", "-p", *config, "--set-resources", "predict:gpu=1",
                       "search_shard:gpu=1").stdout
    assert given.count("--device auto") == 4 + 24     # every predict and search_shard job, no other
    moved = tmp_path / "moved.yaml"
    moved.write_text(yaml.safe_dump({"predict": {"device": "cuda"}}))
    result = _snakemake(root, root, "-n", *config[:2], str(moved), check=False)
    assert result.returncode != 0
    assert "'predict.device' is no longer a configuration key" in result.stdout + result.stderr
    assert "--set-resources predict:gpu=1" in result.stdout + result.stderr


def test_config_typo_names_the_key(root, tmp_path):
    config = _config(tmp_path, root, {"ana": "anaerococcus_slice.fasta"}, chunks={"protein_per_chunk": 3})
    result = _snakemake(root, tmp_path, "-n", "--configfile", str(config), check=False)
    assert result.returncode != 0
    assert "protein_per_chunk" in result.stdout + result.stderr


def test_bad_proteome_stops_with_file_and_record(root, tmp_path):
    bad = tmp_path / "bad.fasta"
    records = read_fasta(root / "example" / "proteomes" / "ecoli_slice.fasta")
    bad.write_text(f">{records[0].id}\n{records[0].sequence}\n>{records[0].id}\n{records[1].sequence}\n")
    config = _config(tmp_path, root, {"ana": "anaerococcus_slice.fasta"})
    data = yaml.safe_load(config.read_text())
    data["proteomes"]["bad"] = str(bad)
    config.write_text(yaml.safe_dump(data))
    result = _snakemake(root, tmp_path, "-n", "--configfile", str(config), check=False)
    assert result.returncode != 0
    assert f"{bad}: record '{records[0].id}': duplicate ID" in result.stdout + result.stderr
    data["proteomes"]["bad"] = str(tmp_path / "missing.fasta")
    config.write_text(yaml.safe_dump(data))
    result = _snakemake(root, tmp_path, "-n", "--configfile", str(config), check=False)
    assert "missing.fasta: file does not exist" in result.stdout + result.stderr


@pytest.mark.slow
def test_real_run_builds_database_and_chunks(root, tmp_path):
    config = _config(tmp_path, root, {"ana": "anaerococcus_slice.fasta", "eco": "ecoli_slice.fasta"})
    database = tmp_path / "sprot.fasta"     # uncompressed: over 1 MB, so Snakemake keeps no checksum of it
    database.write_bytes(gzip.decompress((root / "example" / "db" / "sprot_firmicutes_slice.fasta.gz").read_bytes()))
    data = yaml.safe_load(config.read_text())
    data["databases"]["sprot"]["fasta"] = [str(database)]
    config.write_text(yaml.safe_dump(data))
    _snakemake(root, tmp_path, "--cores", "2", "--configfile", str(config), "--until", "chunk_fasta", "db_build")
    results = tmp_path / "results"
    manifest = yaml.safe_load((results / "db" / "sprot" / "manifest.json").read_text())
    assert manifest["total_sequences"] == 3000 and len(manifest["shards"]) == 3
    table = read_frame(results / "ana" / "chunks" / "chunks.parquet", CHUNKS)
    chunk_ids = sorted(r.id for f in (results / "ana" / "chunks").glob("chunk_*.fasta") for r in read_fasta(f))
    assert chunk_ids == sorted(table["protein"]) and len(chunk_ids) == 35
    assert (tmp_path / "logs" / "db_build" / "sprot.log").exists()
    assert (results / "benchmarks" / "db_build" / "sprot.tsv").exists()
    again = _snakemake(root, tmp_path, "--cores", "2", "--configfile", str(config),
                       "--until", "chunk_fasta", "db_build")
    output = again.stdout + again.stderr
    assert "Nothing to be done" in output or _job_counts(output) == {"total": 0}  # nothing was rerun
    # the reference data copied again (a new timestamp, the same content) rebuilds nothing: the database's
    # inputs are `ancient`
    assert database.stat().st_size > 1_000_000
    os.utime(database, (database.stat().st_atime, database.stat().st_mtime + 3600))
    planned = _snakemake(root, tmp_path, "-n", "--configfile", str(config), "--until", "chunk_fasta", "db_build")
    output = planned.stdout + planned.stderr
    assert "Nothing to be done" in output or _job_counts(output) == {"total": 0}
