"""``trackfold status``: where a run stands, from the files the workflow wrote (workflow_lib.workflow.status).

The results tree is built by hand around a real chunk plan: the first three proteins of the bundled E. coli
slice (example/proteomes/ecoli_slice.fasta) in two chunks, one finished by every stage it has, the other in the
middle of its search, with per-protein receipts as the template and inference jobs write them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workflow_lib.cli import main
from workflow_lib.db.chunks import chunk_table
from workflow_lib.errors import InputError
from workflow_lib.workflow.status import format_status, proteome_status
from workflow_lib.schemas.db import CHUNKS
from workflow_lib.schemas.io import write_table
from workflow_lib.seqio.fasta import read_fasta

BENCH_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _bench(path: Path, cpu: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(BENCH_HEADER + f"{cpu + 1}\t0:00:01\t100\t200\t90\t95\t0\t0\t50\t{cpu}\n")


def _receipt(folder: Path, name: str, stage: str, seconds: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.{stage}.done.json").write_text(json.dumps(
        {"key": {"stage": stage}, "files": [], "row": {"protein": name, "seconds": seconds}}))


@pytest.fixture()
def run(root, tmp_path):
    """(results folder, plan): chunk 0 through the search, templates and features; chunk 1 in iteration 1."""
    records = read_fasta(root / "example" / "proteomes" / "ecoli_slice.fasta")[:3]
    plan = chunk_table("eco", records, 2)
    results = tmp_path / "results"
    write_table(results / "eco" / "chunks" / "chunks.parquet", plan, CHUNKS)
    bench = results / "benchmarks"
    _bench(bench / "db_build" / "db.tsv", 500.0)                       # shared: no stage of the proteome
    for stage, folder in (("msa", "msa"), ("templates", "templates"), ("features", "features")):
        (results / "eco" / folder).mkdir(parents=True, exist_ok=True)
        (results / "eco" / folder / "chunk_0000.stats.parquet").write_bytes(b"PAR1")   # existence marks done
    _bench(bench / "search_shard" / "eco" / "0000_1_000.tsv", 100.0)
    _bench(bench / "msa_merge" / "eco" / "0000_1.tsv", 20.0)
    _bench(bench / "search_shard" / "eco" / "0001_1_000.tsv", 30.0)    # the open chunk's first shard
    _bench(bench / "template_search" / "eco" / "0000.tsv", 12.0)
    _bench(bench / "features" / "eco" / "0000.tsv", 6.0)
    open_chunk = plan[plan["chunk"] == 1]
    first_open = open_chunk["safe_id"].iloc[0]
    _receipt(results / "eco" / "templates", first_open, "templates", 4.0)
    _receipt(results / "eco" / "structures", first_open, "predict", 25.0)
    return results, plan


def test_status_counts_chunks_receipts_and_jobs_and_estimates_what_is_left(run):
    results, plan = run
    status = proteome_status(results, "eco")
    stages = {s.stage: s for s in status.stages}
    residues = plan.groupby("chunk")["length"].sum().astype(float)
    first_open = plan[plan["chunk"] == 1].iloc[0]
    done = int((plan["chunk"] == 0).sum())
    assert status.proteins == 3 and status.chunks == 2 and status.residues == int(residues.sum())

    msa = stages["msa"]   # rate from the finished chunk; what the open chunk's finished shard took is spent
    assert (msa.chunks_done, msa.proteins_done, msa.jobs_done) == (1, done, 3)
    assert msa.cpu_spent == pytest.approx(150.0)
    assert msa.cpu_per_residue == pytest.approx(120.0 / residues[0])
    assert msa.cpu_left == pytest.approx(120.0 / residues[0] * residues[1] - 30.0)

    templates = stages["templates"]   # a receipt in the open chunk: that protein is done
    assert templates.proteins_done == done + 1 and templates.cpu_spent == pytest.approx(16.0)
    assert templates.cpu_left == pytest.approx(12.0 / residues[0] * (residues[1] - first_open["length"]))

    assert stages["features"].proteins_done == done and stages["features"].cpu_left == pytest.approx(
        6.0 / residues[0] * residues[1])

    predict = stages["predict"]   # no chunk finished: the rate comes from the receipt
    assert (predict.chunks_done, predict.proteins_done) == (0, 1)
    assert predict.cpu_per_residue == pytest.approx(25.0 / first_open["length"])
    assert predict.cpu_left == pytest.approx(25.0 / first_open["length"] * (residues.sum() - first_open["length"]))
    assert status.cpu_left == pytest.approx(sum(s.cpu_left for s in status.stages))
    assert not status.summary and not status.finished

    assert status.searching == ((1, 0, 1),)
    text = format_status(status, cores=2)
    assert f"| msa | 1 / 2 | {done} / 3 | 3 |" in text
    assert "Searching: chunk 0001 (0 iterations merged, 1 shard job of iteration 1 done)." in text
    assert f"{status.cpu_left / 3600 / 2:,.1f} h on 2 cores" in text


def test_a_stage_with_nothing_finished_has_no_estimate_and_a_bad_receipt_counts_as_not_done(run):
    results, plan = run
    first_open = plan[plan["chunk"] == 1]["safe_id"].iloc[0]
    (results / "eco" / "structures" / f"{first_open}.predict.done.json").write_text("{ truncated")
    state = results / "eco" / "search" / "chunk_0001" / "iter_1" / "state.parquet"   # iteration 1 merged
    state.parent.mkdir(parents=True)
    state.write_bytes(b"PAR1")
    _bench(results / "benchmarks" / "search_shard" / "eco" / "0001_2_003.tsv", 10.0)
    status = proteome_status(results, "eco")
    stages = {s.stage: s for s in status.stages}
    assert stages["predict"].proteins_done == 0 and stages["predict"].cpu_left is None
    assert status.searching == ((1, 1, 1),)
    text = format_status(proteome_status(results, "eco"), cores=1)
    assert "| predict | 0 / 2 | 0 / 3 | 0 | 0.00 | - | no estimate yet |" in text
    assert "none yet for predict" in text


def test_status_command_prints_json_rows_and_names_a_missing_proteome(run, capsys):
    results, _ = run
    assert main(["status", "--results", str(results), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["stage"] for row in rows] == ["msa", "templates", "features", "predict"]
    assert {row["proteome"] for row in rows} == {"eco"}
    assert main(["status", "--results", str(results), "--proteome", "yeast"]) == 2
    error = capsys.readouterr().err
    assert "no chunk table for proteome 'yeast'" in error and "proteomes found: eco" in error
    assert main(["status", "--results", str(results.parent / "elsewhere")]) == 2
    assert "no proteome with a chunk plan" in capsys.readouterr().err
    with pytest.raises(InputError, match="proteomes found: eco"):
        proteome_status(results, "yeast")
