"""Robustness of the whole workflow (tests, not promises): kill and resume, corrupted intermediates, bad input,
determinism. Every test runs the workflow's own targets on a tiny configuration in a temporary folder, so new
stages are covered as soon as their rules are part of `all`.

Tiny configuration: 2 E. coli proteins (example/proteomes/ecoli_slice.fasta) in one chunk, the first 150
sequences of the bundled database (example/db) in one shard, one search iteration: the fewest jobs per stage.
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from test_workflow import SNAKEMAKE, _snakemake
from workflow_lib.cli import main
from workflow_lib.errors import InputError, SchemaError
from workflow_lib.report.compare import compare_results, result_files
from workflow_lib.workflow.status import proteome_status
from workflow_lib.seqio.fasta import read_fasta
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.schemas.db import CHUNKS, KMER_INDEX
from workflow_lib.schemas.io import read_frame, read_npz

pytestmark = pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake is not installed")


def _tiny_inputs(root: Path, folder: Path) -> tuple[Path, Path]:
    """The tiny proteome and database (real sequences), written once per folder."""
    folder.mkdir(parents=True, exist_ok=True)
    proteome = folder / "proteome.fasta"
    records = read_fasta(root / "example" / "proteomes" / "ecoli_slice.fasta")[:2]
    proteome.write_text("".join(f">{r.id}\n{r.sequence}\n" for r in records))
    database = folder / "db.fasta"
    with gzip.open(root / "example" / "db" / "sprot_firmicutes_slice.fasta.gz", "rt") as handle:
        text = handle.read()
    database.write_text(">" + ">".join(text.split(">")[1:151]))
    return proteome, database


def _config(folder: Path, proteome: Path | str, database: Path | str, **extra) -> Path:
    config = {"results": "results", "proteomes": {"eco": str(proteome)},
              "databases": {"db": {"fasta": [str(database)], "shards": 1}},
              "chunks": {"proteins_per_chunk": 4}, "search": {"iterations": 1}, **extra}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _session_processes(session: int, needle: str) -> list[int]:
    """PIDs of processes in `session` whose command line contains `needle` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == session and needle in cmdline:
            found.append(int(entry.name))
    return found


def _start(root: Path, workdir: Path, config: Path) -> subprocess.Popen:
    return subprocess.Popen([SNAKEMAKE, "-s", str(root / "Snakefile"), "-d", str(workdir), "--cores", "1",
                             "--configfile", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def _wait_for(condition, process: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"workflow ended before the kill point:\n{process.stdout.read().decode()}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            raise AssertionError("kill point not reached in time")
        time.sleep(0.05)


@pytest.mark.slow
def test_kill_a_job_then_the_whole_run_then_resume_equals_an_uninterrupted_run(root, tmp_path):
    proteome, database = _tiny_inputs(root, tmp_path / "inputs")
    reference, interrupted = tmp_path / "reference", tmp_path / "interrupted"
    for folder in (reference, interrupted):
        folder.mkdir()
        _config(folder, proteome, database)
    _snakemake(root, reference, "--cores", "1", "--configfile", str(reference / "config.yaml"))
    assert any(name.endswith("manifest.json") for name in result_files(reference / "results"))
    finished = proteome_status(reference / "results", "eco")
    assert finished.finished and finished.cpu_left == 0.0
    assert all(s.chunks_done == s.chunks == 1 for s in finished.stages if s.stage != "templates")

    # 1. SIGKILL the database build while it runs: the run fails and leaves no manifest (written last).
    run = _start(root, interrupted, interrupted / "config.yaml")
    _wait_for(lambda: _session_processes(run.pid, "workflow_lib db build"), run)
    time.sleep(0.1)   # the tiny build finishes within a second of starting (imports included)
    for pid in _session_processes(run.pid, "workflow_lib db build"):
        os.kill(pid, signal.SIGKILL)
    assert run.wait(timeout=120) != 0
    assert not (interrupted / "results" / "db" / "db" / "manifest.json").exists()

    # 2. SIGKILL snakemake and all its jobs once half of the workflow's jobs have started.
    half = len(list((reference / "logs").rglob("*.log"))) // 2 + 1
    run = _start(root, interrupted, interrupted / "config.yaml")
    _wait_for(lambda: len(list((interrupted / "logs").rglob("*.log"))) >= half, run)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait(timeout=60)
    # where the killed run stands is read from its files, whatever the kill left half-written
    if (interrupted / "results" / "eco" / "chunks" / "chunks.parquet").exists():
        assert not proteome_status(interrupted / "results", "eco").finished

    # 3. Snakemake's lock survives a SIGKILL: the next run says so and how to clear it.
    locked = _snakemake(root, interrupted, "--cores", "1", "--configfile", str(interrupted / "config.yaml"),
                        check=False)
    assert locked.returncode != 0 and "--unlock" in locked.stdout + locked.stderr
    _snakemake(root, interrupted, "--unlock", "--configfile", str(interrupted / "config.yaml"))

    # 4. Run again with the local profile (rerun-incomplete): it finishes and every result equals the reference.
    _snakemake(root, interrupted, "--profile", str(root / "profiles" / "local"), "--cores", "1",
               "--configfile", str(interrupted / "config.yaml"))
    # Also determinism: two runs give byte-identical files and tables equal but for measured seconds.
    assert compare_results(reference / "results", interrupted / "results") == []
    leftovers = [p.name for p in (interrupted / "results").rglob(".*") if p.is_file()]
    assert all(name.endswith(".tmp") for name in leftovers), leftovers   # only a killed writer's temp files
    again = _snakemake(root, interrupted, "--cores", "1", "--configfile", str(interrupted / "config.yaml"))
    assert "Nothing to be done" in again.stdout + again.stderr


@pytest.mark.slow
def test_truncated_intermediates_are_named(root, tmp_path, data_dir):
    """Parquet through the workflow; npz and A3M through their readers and the commands that use them."""
    proteome, database = _tiny_inputs(root, tmp_path / "inputs")
    config = _config(tmp_path, proteome, database)
    _snakemake(root, tmp_path, "results/eco/chunks/chunk_0000.fasta", "results/db/db/manifest.json",
               "--cores", "1", "--configfile", str(config))
    table = tmp_path / "results" / "eco" / "chunks" / "chunks.parquet"
    assert len(read_frame(table, CHUNKS)) == 2
    table.write_bytes(table.read_bytes()[:-40])
    result = _snakemake(root, tmp_path, "results/eco/chunks/chunk_0000.fasta", "--cores", "1", "--configfile",
                        str(config), "--forcerun", "chunk_fasta", check=False)
    assert result.returncode != 0
    log = (tmp_path / "logs" / "chunk_fasta" / "eco" / "0000.log").read_text()
    assert "results/eco/chunks/chunks.parquet: not a readable Parquet file" in log, log

    index = tmp_path / "results" / "db" / "db" / "shard_000.kmer.npz"
    read_npz(index, KMER_INDEX)
    index.write_bytes(index.read_bytes()[: index.stat().st_size // 2])
    with pytest.raises(SchemaError, match=f"{index}: not a readable npz file"):
        read_npz(index, KMER_INDEX)

    a3m = tmp_path / "t1078.a3m"
    text = (data_dir / "formats" / "t1078_ss2.a3m").read_text()
    a3m.write_text(text[: len(text) // 2])   # cut inside a record
    with pytest.raises(InputError, match=f"{a3m}: record '.+': has \\d+ match columns but the query has"):
        read_a3m(a3m)
    assert main(["features", "--out-dir", str(tmp_path / "features"), str(a3m)]) == 2
    assert not (tmp_path / "features" / "t1078.npz").exists()


def _bad_fasta(kind: str, root: Path, folder: Path, data_dir: Path) -> tuple[Path, str]:
    """A proteome FASTA that breaks the input policy, and the message expected for it."""
    records = read_fasta(root / "example" / "proteomes" / "ecoli_slice.fasta")
    good = "".join(f">{r.id}\n{r.sequence}\n" for r in records[:2])
    path = folder / f"{kind}.fasta"
    if kind == "empty_file":
        path.write_text("")
        return path, f"{path}: contains no FASTA records"
    if kind == "empty_record":
        path.write_text(good + f">{records[2].id}\n")
        return path, f"record '{records[2].id}': empty sequence"
    if kind == "duplicate_id":
        path.write_text(good + f">{records[0].id}\n{records[3].sequence}\n")
        return path, f"record '{records[0].id}': duplicate ID"
    if kind == "dna":
        path.write_text(good + (data_dir / "report" / "made1_dna.fasta").read_text())
        return path, "looks like a nucleotide sequence"
    if kind == "missing":
        return folder / "does_not_exist.fasta", "does_not_exist.fasta: file does not exist"
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["empty_file", "empty_record", "duplicate_id", "dna", "missing"])
def test_bad_proteome_stops_before_any_job_with_a_clear_message(root, tmp_path, data_dir, kind):
    proteome, message = _bad_fasta(kind, root, tmp_path, data_dir)
    config = _config(tmp_path, proteome, root / "example" / "db" / "sprot_firmicutes_slice.fasta.gz")
    result = _snakemake(root, tmp_path, "-n", "--configfile", str(config), check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert message in output, output[-2000:]
    if kind != "missing":
        assert str(proteome) in output
    assert "Traceback" not in output.split("Error")[0]


def _long_protein(root: Path) -> str:
    """A 10,000-residue protein: real database proteins (example/db) joined end to end."""
    sequence = ""
    for record in read_fasta(root / "example" / "db" / "sprot_firmicutes_slice.fasta.gz"):
        sequence += record.sequence
        if len(sequence) >= 10_000:
            return sequence[:10_000]
    raise AssertionError("the example database has fewer than 10,000 residues")


def test_long_protein_is_skipped_with_its_reason_or_stops_the_run(root, tmp_path):
    records = read_fasta(root / "example" / "proteomes" / "ecoli_slice.fasta")[:3]
    proteome = tmp_path / "with_long.fasta"
    proteome.write_text("".join(f">{r.id}\n{r.sequence}\n" for r in records) + f">giant\n{_long_protein(root)}\n")
    database = root / "example" / "db" / "sprot_firmicutes_slice.fasta.gz"
    config = _config(tmp_path, proteome, database)
    _snakemake(root, tmp_path, "results/eco/chunks/chunks.parquet", "--cores", "1", "--configfile", str(config))
    plan = read_frame(tmp_path / "results" / "eco" / "chunks" / "chunks.parquet", CHUNKS).set_index("protein")
    assert plan.loc["giant", "chunk"] == -1
    assert plan.loc["giant", "note"] == "skipped: 10000 residues > max_length 5000"
    assert (plan.drop("giant")["chunk"] >= 0).all()   # nothing else lost
    config = _config(tmp_path, proteome, database, chunks={"proteins_per_chunk": 4, "too_long": "error"})
    result = _snakemake(root, tmp_path, "-n", "--configfile", str(config), check=False)
    assert result.returncode != 0
    assert f"{proteome}: record 'giant': protein of 10000 residues exceeds chunks.max_length=5000" in \
        result.stdout + result.stderr


def test_database_without_sequences_stops_its_build_with_a_clear_message(root, tmp_path):
    empty = tmp_path / "empty_db.fasta"
    empty.write_text("")
    config = _config(tmp_path, root / "example" / "proteomes" / "ecoli_slice.fasta", empty)
    result = _snakemake(root, tmp_path, "results/db/db/manifest.json", "--cores", "1", "--configfile", str(config),
                        check=False)
    assert result.returncode != 0
    log = (tmp_path / "logs" / "db_build" / "db.log").read_text()
    assert f"{empty}: contains no FASTA records" in log, log
    assert not (tmp_path / "results" / "db" / "db" / "manifest.json").exists()
    assert np.all([not p.name.endswith(".parquet") for p in (tmp_path / "results").rglob("*")])
