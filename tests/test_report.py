"""Summary table, runtime table, report figures and progress logging (workflow_lib.report).

The results tree is built in a temporary folder from real data: a three-protein proteome made of the queries of
three real MSAs (CASP14 T1078, HH-suite's FAM69B query, caudal_act), the MSAs themselves, HHsearch's real top
hits of T1078 turned into template-hit rows, and RoseTTAFold's per-residue confidence of its T1078 model
(tests/data/README.md, report/).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from workflow_lib.cli import main, resources_line
from workflow_lib.db.chunks import chunk_table
from workflow_lib.errors import InputError, SchemaError
from workflow_lib.report.cli import PLOTS
from workflow_lib.report.compare import compare_results
from workflow_lib.report.pages import write_pages
from workflow_lib.report.collect import (
    build_summary,
    job_log,
    read_benchmark,
    read_log_resources,
    stage_of_rule,
)
from workflow_lib.report.plots import coverage_matrix, select_proteins
from workflow_lib.report.progress import Progress, format_duration, track
from workflow_lib.schemas.report import RUNTIME, SUMMARY
from workflow_lib.seqio.alphabet import GAP_CODE
from workflow_lib.seqio.fasta import Record
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.schemas.db import CHUNKS
from workflow_lib.schemas.io import read_frame, write_table
from workflow_lib.schemas.templates import TEMPLATE_HITS

MSAS = {"T1078": "formats/t1078_ss2.a3m", "FA69B": "formats/hhsuite_query.a3m",
        "caudal_act": "aligner/hhm/caudal_act.a3m"}
BENCH_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _bench(path, seconds, rss="100.5", cpu="1.0"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(BENCH_HEADER + f"{seconds}\t0:00:01\t{rss}\t200\t90\t95\t0\t0\t50\t{cpu}\n")


def _hits_frame(data_dir, query):
    top = pd.read_csv(data_dir / "report" / "t1078_hhsearch_top10.tsv", sep="\t")
    n = len(top)
    return pd.DataFrame({
        "query": query, "template": top["template"], "rank": top["rank"].astype("int16"),
        "evalue": top["evalue"].astype(float), "pvalue": top["pvalue"].astype(float),
        "significance": np.exp(-top["evalue"].astype(float)).astype("float32"),
        "bitscore": top["bitscore"].astype("float32"), "identity": np.float32(0.2),
        "similarity": np.float32(0.4), "aligned_cols": top["aligned_cols"].astype("int32"),
        "qstart": top["qstart"].astype("int32"), "qend": top["qend"].astype("int32"),
        "tstart": top["tstart"].astype("int32"), "tend": top["tend"].astype("int32"),
        "qlen": np.int32(138), "tlen": top["tlen"].astype("int32"), "alignment": ["M"] * n,
        "template_db": "pdb100_2021Mar03", "db_size": np.int32(153500), "null_lambda": np.float32(0.3),
        "null_mu": np.float32(2.0)}).iloc[::-1]  # stored out of order on purpose: the summary must pick rank 1


@pytest.fixture(scope="module")
def results(data_dir, tmp_path_factory):
    """results/ of proteome 'mini': chunks, MSAs + stats, template hits, residues, benchmark files."""
    root = tmp_path_factory.mktemp("report") / "results"
    alignments = {name: read_a3m(data_dir / path) for name, path in MSAS.items()}
    records = [Record(name, "", a.query, name) for name, a in alignments.items()]
    plan = chunk_table("mini", records, 2)
    write_table(root / "mini" / "chunks" / "chunks.parquet", plan, CHUNKS)
    for chunk, members in plan.groupby("chunk"):
        rows = []
        for name in members["protein"]:
            alignment = alignments[name]
            (root / "mini" / "msa").mkdir(parents=True, exist_ok=True)
            (root / "mini" / "msa" / f"{name}.a3m").write_text((data_dir / MSAS[name]).read_text())
            covered = alignment.matches != GAP_CODE
            rows.append({"protein": name, "depth": alignment.depth, "neff": float(alignment.depth) / 3,
                         "coverage": float(covered.mean()), "iterations": 2, "seconds": 1.5})
        pq.write_table(pa.Table.from_pylist(rows), root / "mini" / "msa" / f"chunk_{chunk:04d}.stats.parquet")
    write_table(root / "mini" / "templates" / "T1078.hits.parquet", _hits_frame(data_dir, "T1078"), TEMPLATE_HITS)
    write_table(root / "mini" / "templates" / "FA69B.hits.parquet", _hits_frame(data_dir, "FA69B").iloc[:0],
                TEMPLATE_HITS)
    plddt = pd.read_csv(data_dir / "report" / "t1078_e2e_plddt.tsv", sep="\t")
    (root / "mini" / "structures").mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(plddt.astype({"plddt": "float32"}), preserve_index=False),
                   root / "mini" / "structures" / "T1078.residues.parquet")
    bench = root / "benchmarks"
    _bench(bench / "db_build" / "sprot.tsv", 12.0)
    _bench(bench / "chunk_table" / "mini.tsv", 3.0)
    _bench(bench / "chunk_table" / "other.tsv", 99.0)          # another proteome: not ours
    _bench(bench / "chunk_fasta" / "mini" / "0000.tsv", 4.0)
    _bench(bench / "predict" / "mini" / "T1078.tsv", 30.0, rss="-", cpu="NA")
    _bench(bench / "predict" / "other" / "T1078.tsv", 77.0)    # same protein name, other proteome
    (root / "other" / "chunks").mkdir(parents=True)
    write_table(root / "other" / "chunks" / "chunks.parquet", plan.assign(proteome="other"), CHUNKS)
    return root


def test_summary_gathers_every_stage_present(results, data_dir):
    summary, runtime = build_summary(results, "mini", other_proteomes=["mini", "other"])
    assert list(summary.columns) == [f.name for f in SUMMARY.schema]
    rows = summary.set_index("protein")
    assert list(summary["protein"]) == ["T1078", "FA69B", "caudal_act"]
    assert rows.loc["T1078", "length"] == 138 and rows.loc["T1078", "msa_depth"] == 426
    assert rows.loc["FA69B", "msa_depth"] == 59 and rows.loc["FA69B", "msa_iterations"] == 2
    # Templates: rank 1 of HHsearch's table; searched without hits -> probability 0; not searched -> null.
    assert rows.loc["T1078", "top_template"] == "3v0r_A"
    assert rows.loc["T1078", "top_template_evalue"] == pytest.approx(220.0)
    assert rows.loc["T1078", "top_template_probability"] == pytest.approx(math.exp(-220.0))
    assert rows.loc["FA69B", "top_template"] is None and rows.loc["FA69B", "top_template_probability"] == 0
    assert rows.loc["caudal_act", "top_template"] is None
    assert np.isnan(rows.loc["caudal_act", "top_template_probability"])
    plddt = pd.read_csv(data_dir / "report" / "t1078_e2e_plddt.tsv", sep="\t")["plddt"]
    assert rows.loc["T1078", "mean_plddt"] == pytest.approx(plddt.mean(), rel=1e-5)
    assert rows.loc["T1078", "fraction_plddt_over_70"] == pytest.approx((plddt > 70).mean())
    assert np.isnan(rows.loc["FA69B", "mean_plddt"])
    # Runtime: own job in full, chunk job shared by length, proteome job shared by all; MSA (no benchmark
    # file here) from its statistics table.
    chunk0 = summary[summary["chunk"] == 0]
    assert chunk0["seconds_chunks"].sum() == pytest.approx(4.0 + 3.0 * chunk0["length"].sum()
                                                           / summary["length"].sum(), rel=1e-5)
    assert summary["seconds_chunks"].sum() == pytest.approx(7.0, rel=1e-5)
    assert rows.loc["T1078", "seconds_predict"] == pytest.approx(30.0)
    assert np.isnan(rows.loc["FA69B", "seconds_predict"])
    assert (summary["seconds_msa"] == 1.5).all()
    assert sorted(runtime["job"]) == ["mini.tsv", "mini/0000.tsv", "mini/T1078.tsv", "sprot.tsv"]
    assert set(runtime["stage"]) == {"database", "chunks", "predict"}
    assert np.isnan(runtime.set_index("job").loc["mini/T1078.tsv", "max_rss_mb"])


def test_missing_stages_leave_null_columns(results, tmp_path):
    """Only the chunk plan: every stage column is null, the table still has every protein."""
    (tmp_path / "mini" / "chunks").mkdir(parents=True)
    (tmp_path / "mini" / "chunks" / "chunks.parquet").write_bytes(
        (results / "mini" / "chunks" / "chunks.parquet").read_bytes())
    summary, runtime = build_summary(tmp_path, "mini")
    assert len(summary) == 3 and len(runtime) == 0
    for column in ("msa_depth", "msa_neff", "top_template_probability", "mean_plddt", "seconds_predict"):
        assert summary[column].isna().all(), column


def test_required_stage_with_a_missing_file_names_it(results):
    with pytest.raises(InputError, match=r"stage 'predict' .* 2 of 3 files are missing, e\.g\. .*FA69B"):
        build_summary(results, "mini", require=["predict"])


def test_truncated_stage_table_names_the_file(results, tmp_path):
    copy = tmp_path / "results"
    for path in results.rglob("*"):
        if path.is_file():
            target = copy / path.relative_to(results)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    stats = copy / "mini" / "msa" / "chunk_0000.stats.parquet"
    stats.write_bytes(stats.read_bytes()[:200])
    with pytest.raises(SchemaError, match=f"{stats}: not a readable Parquet file"):
        build_summary(copy, "mini")
    stats.write_bytes(b"")
    bench = copy / "benchmarks" / "chunk_table" / "mini.tsv"
    bench.write_text("garbage\n")
    with pytest.raises(SchemaError, match=f"{bench}: not a Snakemake benchmark file"):
        read_benchmark(bench)


def test_summarize_command_writes_tables_and_plots(results, tmp_path):
    out = tmp_path / "out"
    args = ["summarize", "--results", str(results), "--proteome", "mini", "--out", str(out / "summary.parquet"),
            "--tsv", str(out / "summary.tsv"), "--runtime-out", str(out / "runtime.parquet"),
            "--plots-dir", str(out / "report"),
            "--require", "msa,templates", "--protein", "caudal_act"]
    assert main(args) == 2   # FA69B is searched, caudal_act is not: templates is not complete
    args[args.index("msa,templates")] = "msa"
    assert main(args) == 0
    summary = read_frame(out / "summary.parquet", SUMMARY)
    assert len(summary) == 3 and summary.loc[0, "top_template"] == "3v0r_A"
    assert len(read_frame(out / "runtime.parquet", RUNTIME)) == 4
    table = pd.read_csv(out / "summary.tsv", sep="\t", keep_default_na=False)
    assert list(table["protein"]) == list(summary["protein"]) and table.loc[0, "top_template"] == "3v0r_A"
    assert not [c for c in table.columns if c.startswith("seconds")] and set(table.columns) < set(summary.columns)
    first = {name: (out / "report" / name).read_bytes() for name in PLOTS}
    assert all(data.startswith(b"\x89PNG") and len(data) > 5000 for data in first.values())
    assert main(args) == 0   # same inputs, byte-identical figures
    assert first == {name: (out / "report" / name).read_bytes() for name in PLOTS}


def test_protein_pages_show_each_stage_and_link_existing_files(results, tmp_path):
    """One page per protein (MSA numbers, template hits, pLDDT plot, relative links to the files that exist) and an
    index linking them; valid HTML (every tag closed), written by the summarize command."""
    from html.parser import HTMLParser

    out = tmp_path / "pages"
    assert main(["summarize", "--results", str(results), "--proteome", "mini", "--out",
                 str(tmp_path / "summary.parquet"), "--pages-dir", str(out)]) == 0
    summary = read_frame(tmp_path / "summary.parquet", SUMMARY)
    assert sorted(p.name for p in (out / "proteins").iterdir()) == sorted(f"{s}.html" for s in summary["safe_id"])
    t1078 = (out / "proteins" / "T1078.html").read_text()
    assert "3v0r_A" in t1078 and "<polyline" in t1078 and "mean pLDDT" in t1078
    depth = int(summary.set_index("safe_id").loc["T1078", "msa_depth"])
    assert f"<td>{depth}</td>" in t1078
    a3m_link = Path(os.path.relpath(results / "mini" / "msa" / "T1078.a3m", out / "proteins")).as_posix()
    assert f'href="{a3m_link}"' in t1078
    assert (out / "proteins" / a3m_link).resolve() == (results / "mini" / "msa" / "T1078.a3m").resolve()
    assert "PDB, pLDDT in B-factors) (not written)" in t1078     # no PDB in this results tree: not linked
    fa69b = (out / "proteins" / "FA69B.html").read_text()
    assert "searched; no template hit" in fa69b and "no prediction in this run" in fa69b
    caudal = (out / "proteins" / "caudal_act.html").read_text()
    assert "no template search in this run" in caudal
    index = (out / "index.html").read_text()
    payload = json.loads(re.search(r'<script type="application/json" id="proteins">(.*?)</script>', index).group(1))
    keys = [column["key"] for column in payload["columns"]]
    pages = [row[keys.index("page")] for row in payload["rows"]]
    assert pages == [f"proteins/{s}.html" for s in summary["safe_id"]]
    assert [row[keys.index("protein")] for row in payload["rows"]] == list(summary["protein"])
    assert (out / "assets" / "3Dmol-min.js").stat().st_size > 100_000 and (out / "assets" / "table.js").exists()

    class Balanced(HTMLParser):
        VOID = {"meta", "br", "rect", "polyline", "link", "image", "stop", "input", "img"}

        def __init__(self):
            super().__init__()
            self.stack = []

        def handle_starttag(self, tag, attrs):
            if tag not in self.VOID:
                self.stack.append(tag)

        def handle_startendtag(self, tag, attrs):
            pass

        def handle_endtag(self, tag):
            if tag in self.VOID:
                return
            assert self.stack and self.stack.pop() == tag, tag

    for page in (t1078, fa69b, caudal, index):
        parser = Balanced()
        parser.feed(page)
        assert parser.stack == []


def test_protein_pages_are_the_same_from_two_processes(results, tmp_path):
    """``--cpus 2`` writes the protein pages in two worker processes: the same files, byte for byte, as one
    process writes; a count below one is refused."""
    pages = {}
    for cpus in (1, 2):
        out = tmp_path / f"pages{cpus}"
        assert main(["summarize", "--results", str(results), "--proteome", "mini", "--out",
                     str(tmp_path / f"summary{cpus}.parquet"), "--pages-dir", str(out), "--cpus", str(cpus)]) == 0
        pages[cpus] = {p.name: p.read_bytes() for p in (out / "proteins").iterdir()}
    assert len(pages[1]) >= 3 and pages[2] == pages[1]
    summary = read_frame(tmp_path / "summary1.parquet", SUMMARY)
    with pytest.raises(InputError, match="cpus must be a positive integer"):
        write_pages(results, "mini", summary, tmp_path / "none", cpus=0)


def test_summarize_without_chunk_table_names_it(tmp_path, capsys):
    assert main(["summarize", "--results", str(tmp_path), "--proteome", "nope", "--out",
                 str(tmp_path / "s.parquet")]) == 2
    assert "nope" in capsys.readouterr().err


def test_coverage_matrix_matches_a_loop(data_dir):
    alignment = read_a3m(data_dir / MSAS["caudal_act"])
    values, depth = coverage_matrix(alignment)
    rows = [r for r in alignment.matches]
    expected = []
    for row in rows:
        covered = [c != GAP_CODE for c in row]
        same = sum(1 for c, q in zip(row, rows[0]) if c != GAP_CODE and c == q)
        expected.append(same / max(sum(covered), 1))
    assert values.shape == alignment.matches.shape
    assert np.allclose(np.sort(np.nanmax(values, axis=1))[::-1], sorted(expected, reverse=True))
    assert values[0, 0] == 1.0   # the query is identical to itself and comes first
    assert list(depth) == [sum(1 for row in rows if row[j] != GAP_CODE) for j in range(alignment.length)]


def test_select_proteins_spreads_over_plddt():
    summary = pd.DataFrame({"protein": list("abcdefg"), "safe_id": list("ABCDEFG"), "chunk": [0] * 6 + [-1],
                            "mean_plddt": [90, 10, 50, np.nan, 70, 30, 99.0], "msa_neff": np.nan})
    assert select_proteins(summary, 3) == ["B", "C", "A"]       # lowest, middle, highest; skipped G excluded
    assert select_proteins(summary, 2, wanted=["d", "E"]) == ["D", "E"]
    assert select_proteins(summary.assign(mean_plddt=np.nan), 2) == ["A", "F"]   # FASTA order fallback


def test_stage_of_rule():
    assert [stage_of_rule(r) for r in ("db_build", "chunk_fasta", "search_shard", "msa", "template_search",
                                       "templates_build", "features", "predict", "summary", "lint")] == \
        ["database", "chunks", "msa", "msa", "templates", "templates", "features", "predict", "report", "other"]


def test_progress_logs_rate_and_eta(caplog):
    now = [100.0]
    progress = Progress("queries", total=10, unit="queries", every_s=5.0, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="trackfold.progress"):
        for _ in range(4):
            now[0] += 2.0
            progress.advance()
        progress.finish()
    # Logged once the 5 s passed (after item 3, t=6 s) and at the end (4 items in 8 s).
    assert progress.lines == ["queries: 3/10 (30.0%), 0.5 queries/s, elapsed 6.0s, ETA 14.0s",
                              "queries: 4/10 (40.0%), 0.5 queries/s, elapsed 8.0s, ETA 12.0s"]
    assert caplog.messages == progress.lines
    assert format_duration(3725) == "1h02m05s" and format_duration(61) == "1m01s"
    assert list(track([1, 2], "x", every_s=1e9)) == [1, 2]
    with pytest.raises(ValueError):
        Progress("x", total=-1)


def test_compare_results_ignores_only_timings_and_temporary_files(tmp_path):
    for run, (seconds, depth) in {"a": (1.0, 5), "b": (9.0, 5), "c": (1.0, 6)}.items():
        folder = tmp_path / run
        (folder / "benchmarks").mkdir(parents=True)
        (folder / "benchmarks" / "x.tsv").write_text(f"s\n{seconds}\n")
        (folder / f".left.{run}.tmp").write_text("partial")
        pq.write_table(pa.table({"protein": ["P1"], "depth": [depth], "seconds": [seconds],
                                 "seconds_msa": [seconds], "max_rss_mb": [seconds]}), folder / "stats.parquet")
        (folder / "msa.a3m").write_text(">P1\nMKV\n")
        (folder / "report").mkdir()
        (folder / "report" / "runtime.png").write_bytes(bytes([int(seconds)]))
    assert compare_results(tmp_path / "a", tmp_path / "b") == []
    assert compare_results(tmp_path / "a", tmp_path / "c") == [
        "stats.parquet: tables differ (beyond the measured time and memory columns)"]
    (tmp_path / "b" / "msa.a3m").write_text(">P1\nMKL\n")
    (tmp_path / "b" / "extra.txt").write_text("")
    assert compare_results(tmp_path / "a", tmp_path / "b") == [f"only in {tmp_path / 'b'}: extra.txt",
                                                               "msa.a3m: bytes differ"]
    assert compare_results(tmp_path / "a", tmp_path / "missing") == [f"not a folder: {tmp_path / 'missing'}"]


def test_job_cpu_comes_from_the_commands_own_log(tmp_path, caplog):
    """Every trackfold command logs its own CPU and peak memory; the runtime table prefers them to the
    benchmark's sampled values, found through the workflow's log layout."""
    fasta = tmp_path / "one.fasta"
    fasta.write_text(">p\nMKVLAAGIVG\n")
    with caplog.at_level("INFO", logger="workflow_lib.cli"):
        assert main(["validate", str(fasta)]) == 0
    line = caplog.records[-1].getMessage()
    assert re.fullmatch(r"trackfold resources: command=validate cpu_s=[0-9.]+ max_rss_mb=[0-9]+ wall_s=[0-9.]+",
                        line), line
    own = resources_line("validate", time.perf_counter())
    cpu = float(re.search(r"cpu_s=([0-9.]+)", own).group(1))
    assert cpu > 0 and float(re.search(r"max_rss_mb=([0-9]+)", own).group(1)) > 10   # this test process
    # a job benchmarked as search_shard/mini/0003_2_011.tsv logs to logs/search_shard/mini/0003/2_011.log
    bench = tmp_path / "benchmarks" / "search_shard" / "mini" / "0003_2_011.tsv"
    bench.parent.mkdir(parents=True)
    bench.write_text("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
                     "52.26\t0:00:52\t600.0\t2000.0\t500.0\t520.0\t0\t0\t40.0\t14.41\n")
    logs = tmp_path / "logs"
    assert job_log(logs, "search_shard", "mini/0003_2_011.tsv") is None
    log = logs / "search_shard" / "mini" / "0003" / "2_011.log"
    log.parent.mkdir(parents=True)
    log.write_text("2026-01-01 00:00:00,000 INFO workflow_lib.search.jobs: 167 queries on shard 11 in 51.9 s\n"
                   "2026-01-01 00:00:00,100 INFO workflow_lib.cli: trackfold resources: command=search-shard "
                   "cpu_s=31.87 max_rss_mb=784 wall_s=52.20\n")
    assert job_log(logs, "search_shard", "mini/0003_2_011.tsv") == log
    assert read_benchmark(bench) == {"seconds": 52.26, "max_rss_mb": 600.0, "cpu_seconds": 14.41}
    assert read_benchmark(bench, log) == {"seconds": 52.26, "max_rss_mb": 784.0, "cpu_seconds": 31.87}
    assert read_log_resources(tmp_path / "missing.log") is None and read_log_resources(bench) is None
    # a rule that runs two commands into one log: CPU summed, the larger peak
    two = tmp_path / "two.log"
    two.write_text(log.read_text() + "x INFO workflow_lib.cli: trackfold resources: command=msa cpu_s=8.13 "
                   "max_rss_mb=900 wall_s=9.00\n")
    assert read_log_resources(two) == {"cpu_seconds": 40.0, "max_rss_mb": 900.0}
    # logs named like the benchmark (one job per chunk) are found too
    flat = logs / "features" / "mini" / "0003.log"
    flat.parent.mkdir(parents=True)
    flat.write_text(line + "\n")
    assert job_log(logs, "features", "mini/0003.tsv") == flat


def test_job_log_finds_every_rules_log_from_its_benchmark_file(tmp_path):
    """The log and benchmark paths the rules declare: each benchmark file leads to its job's log."""
    text = "\n".join(path.read_text() for path in sorted((Path(__file__).parent.parent / "rules").glob("*.smk")))
    values = {"proteome": "ecoli", "chunk": "0007", "iteration": "2", "shard": "011", "database": "uniprot",
              "template_db": "pdb", "batch": "0003", "TRAIN.name": "run"}

    def filled(pattern: str) -> str:
        return re.sub(r"\{\{?([\w.]+)\}?\}", lambda m: values[m.group(1)], pattern)

    # PATHS.benchmark("rule", "{proteome}/{chunk}"), PATHS.benchmark("rule", TRAIN.name) or f"{TRAIN.name}/{{batch}}"
    declared = re.findall(r"PATHS\.benchmark\(\"(\w+)\", (f?\"[^\"]+\"|TRAIN\.name)\)", text)
    benchmarks = {rule: filled("{TRAIN.name}" if job == "TRAIN.name" else job.lstrip("f").strip('"'))
                  for rule, job in declared}
    logs = {rule: filled(rest) for rule, rest in re.findall(r"\"logs/(\w+)/([^\"]+)\.log\"", text)}
    assert len(benchmarks) >= 20 and set(benchmarks) <= set(logs)
    for rule, job in benchmarks.items():
        log = tmp_path / "logs" / rule / f"{logs[rule]}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("")
        assert job_log(tmp_path / "logs", rule, f"{job}.tsv") == log, rule


def test_report_defaults_are_shared_by_the_library_the_schema_and_trackfold_summarize(root):
    """``trackfold summarize`` by hand draws the proteins the workflow's summary rule draws."""
    import argparse
    import dataclasses
    import inspect

    import yaml

    from workflow_lib.report import cli as report_cli
    from workflow_lib.workflow.config import ReportConfig

    parser = argparse.ArgumentParser()
    report_cli.register(parser.add_subparsers())
    cli = vars(parser.parse_args(["summarize", "--results", "results", "--proteome", "p", "--out", "s.parquet"]))
    schema = yaml.safe_load((root / "config" / "schema.yaml").read_text())["properties"]["report"]["properties"]
    config = ReportConfig()
    assert set(schema) == {field.name for field in dataclasses.fields(ReportConfig)}
    library = inspect.signature(select_proteins).parameters["count"].default
    assert schema["plot_proteins"]["default"] == config.plot_proteins == cli["plot_proteins"] == library
    assert schema["proteins"]["default"] == list(config.proteins) == cli["protein"] == []
