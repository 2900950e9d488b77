"""Prefilter benchmark: how much each stage cuts the database, and which homologs it loses.

For a deterministic subsample of queries of the Pfam and CATH sets (:mod:`search_bench.datasets`), with the
query's single-sequence profile (what iteration 1 searches with):

1. **stages** of the search's prefilter (:func:`workflow_lib.search.engine.prefilter_query_shard`, run as the
   search runs it): targets with a seeded diagonal, targets passing the gapless stage with its banded stage 1b
   (directly above ``4.5 + log2(Lq·Lt)`` bits, or between ``-2`` and that with a banded score above
   ``6 + log2(Lq·Lt)``) and the gapped Smith–Waterman stage (``N_db·Lq·Lt·2^-S < 1000``); HHblits' single
   gapless pass (``2.5 + log2(Lq·Lt)``, stage 1b off; Remmert et al. 2012, Nat. Methods 9:173) is a row of its own;
2. **truth**: the query's homologs (Pfam: labelled homologous pairs; CATH: same topology, C.A.T, self
   excluded), and among them the *detectable* ones: what an exhaustive Viterbi of the same profile against
   every database sequence (no prefilter, composition-bias corrected, the search's E-values) scores at
   E ≤ 10 (reporting) and E ≤ 1e-3 (inclusion). A prefilter can only lose what Viterbi would have found, so
   "lost" is counted against the detectable homologs;
3. a small grid of settings around the defaults (seed shape of the index × seed threshold × diagonals scored
   per target), with the prefilter's CPU time per query.

Writes ``benchmarks/_work/prefilter/results.json`` and the section "## Prefilter: reduction and homologs lost"
of benchmarks/RESULTS.md::

    .venv/bin/python benchmarks/prefilter.py                 # 60 queries per set
    .venv/bin/python benchmarks/prefilter.py --queries 20 --no-write

HHblits' two-stage prefilter (Remmert et al. 2012, Nat. Methods 9:173) — this script measures it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from search_bench import datasets, report  # noqa: E402
from search_bench.tools import write_records  # noqa: E402
from workflow_lib.aligner import align_targets, profile_from_sequence  # noqa: E402
from workflow_lib.db.build import build_database, load_kmer_index, load_shard  # noqa: E402
from workflow_lib.search.bias import composition_bias_bits  # noqa: E402
from workflow_lib.search.engine import DatabaseTotals, make_query, prefilter_query_shard  # noqa: E402
from workflow_lib.db.kmer_index import DEFAULT_SHAPE, build_kmer_index  # noqa: E402
from workflow_lib.search.gapless import GAPLESS_OFFSET_BITS  # noqa: E402
from workflow_lib.search.shard_cache import ShardCache  # noqa: E402
from workflow_lib.search.settings import DIAGONALS_PER_TARGET, FAST, default_kmer_threshold  # noqa: E402
from workflow_lib.seqio.atomic import write_text_atomic  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
WORK = ROOT / "benchmarks" / "_work" / "prefilter"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## Prefilter: reduction and homologs lost"
DEFAULT_BITS = default_kmer_threshold(DEFAULT_SHAPE.count("1"), spaced=True)
GRID = ((DEFAULT_SHAPE, DEFAULT_BITS, DIAGONALS_PER_TARGET, True), (DEFAULT_SHAPE, DEFAULT_BITS, DIAGONALS_PER_TARGET, False),
        (DEFAULT_SHAPE, 4.5, 4, True), (DEFAULT_SHAPE, 5.5, 4, True), (DEFAULT_SHAPE, 5.0, 8, True),
        ("1111", 4.5, 4, True), ("111", 3.0, 4, True))
"""(seed shape of the index, seed threshold bits, diagonals per target, banded stage 1b on); the first row is
the default, the second HHblits' single gapless pass."""
SEED_PASS = {"gapless_offset": GAPLESS_OFFSET_BITS, "band_gate": GAPLESS_OFFSET_BITS}
"""Stage 1b off, the gapless pass at HHblits' 2.5 bits."""


def homologs(dataset: datasets.Dataset, query: str) -> set[str]:
    if dataset.pairs is not None:
        pairs = dataset.pairs[dataset.pairs["label"].isin(datasets.HOMOLOGOUS_LABELS)]
        return set(pairs.loc[pairs["a"] == query, "b"]) | set(pairs.loc[pairs["b"] == query, "a"])
    key = datasets.cath_key(dataset.labels[query], "topology")
    return {name for name, label in dataset.labels.items()
            if name != query and datasets.cath_key(label, "topology") == key}


def run_set(name: str, n_queries: int) -> dict:
    loader = datasets.load_pfam if name == "pfam" else datasets.load_cath
    dataset = loader(SHARED, n_queries)
    work = WORK / name
    work.mkdir(parents=True, exist_ok=True)
    fasta = write_records(work / "db.fasta", dataset.database)
    db_dir = work / "db"
    build_database([fasta], db_dir, shards=1)
    totals = DatabaseTotals.from_manifest(db_dir)
    shard = load_shard(db_dir, 0)
    indices = {shape: load_kmer_index(db_dir, 0) if shape == DEFAULT_SHAPE
               else build_kmer_index(shard.residues, shard.offsets, shape=shape) for shape in {entry[0] for entry in GRID}}
    caches = {shape: ShardCache() for shape in indices}   # one per index, as the search keeps one per shard
    ids = list(shard.ids)
    position = {target: k for k, target in enumerate(ids)}
    targets = [shard.sequence(k) for k in range(len(shard))]
    lengths = np.array([t.size for t in targets], dtype=np.int64)
    rows = []
    for number, (query_id, sequence) in enumerate(dataset.queries, start=1):
        truth = {position[t] for t in homologs(dataset, query_id) if t in position}
        if not truth:
            continue
        profile = profile_from_sequence(sequence)
        query = make_query(query_id, profile, totals, FAST.search)
        # exhaustive Viterbi (no prefilter): score-only on every target, then the backtrace + bias correction
        # on those within E ≤ 10 before correction (the correction only lowers scores), as the search does
        raw = np.array([h.score for h in align_targets(profile, targets, cpus=1)])
        within = np.flatnonzero(query.calibration.evalues(raw, lengths, totals.sequences) <= 10.0)
        evalue = np.full(len(targets), np.inf)
        if within.size:
            hits = align_targets(profile, [targets[k] for k in within], backtrace=True, cpus=1)
            bits = np.array([h.score - composition_bias_bits(profile.emissions, profile.background, targets[k],
                                                             h.pairs) for h, k in zip(hits, within)])
            evalue[within] = query.calibration.evalues(bits, lengths[within], totals.sequences)
        self_index = position.get(query_id)
        detectable = {k for k in truth if evalue[k] <= 10.0 and k != self_index}
        includable = {k for k in detectable if evalue[k] <= 1e-3}
        row = {"query": query_id, "length": len(sequence), "homologs": len(truth),
               "detectable": len(detectable), "includable": len(includable), "settings": {}}
        for shape, threshold, diagonals, band in GRID:
            settings = dataclasses.replace(FAST.search, kmer_threshold=threshold, diagonals_per_target=diagonals,
                                           **({} if band else SEED_PASS))
            started = time.process_time()
            prefiltered = prefilter_query_shard(query, shard, indices[shape], totals, settings,
                                                cache=caches[shape])
            seconds = time.process_time() - started
            passed = set(prefiltered.gapless.sequence.tolist())
            gapped = set(prefiltered.gapless.sequence[prefiltered.passed].tolist())
            row["settings"][setting_name(shape, threshold, diagonals, band)] = {
                "seeded": prefiltered.gapless.seeded_targets, "gapless": len(passed), "gapped": len(gapped),
                "seconds": seconds,
                "lost_gapless": len(detectable - passed), "lost_gapped": len(detectable - gapped),
                "lost_included_gapped": len(includable - gapped),
                "homologs_gapped": len(truth & gapped),
            }
        rows.append(row)
        print(f"[prefilter] {name} {number}/{len(dataset.queries)} {query_id}", file=sys.stderr, flush=True)
    return {"set": name, "n_db": totals.sequences, "residues": totals.residues, "queries": rows}


def setting_name(shape: str, threshold: float, diagonals: int, band: bool = True) -> str:
    return f"{shape} / {threshold} / {diagonals}" + ("" if band else " / HHblits' single pass")


def summarise(result: dict) -> list[dict]:
    rows = result["queries"]
    out = []
    for key in rows[0]["settings"]:
        per = [r["settings"][key] for r in rows]
        detectable = sum(r["detectable"] for r in rows)
        includable = sum(r["includable"] for r in rows)
        out.append({
            "setting": key, "queries": len(rows),
            "seeded": float(np.mean([p["seeded"] for p in per])),
            "gapless": float(np.mean([p["gapless"] for p in per])),
            "gapped": float(np.mean([p["gapped"] for p in per])),
            "reduction": result["n_db"] / max(float(np.mean([p["gapped"] for p in per])), 1e-9),
            "homologs": sum(r["homologs"] for r in rows), "detectable": detectable, "includable": includable,
            "lost_gapless": sum(p["lost_gapless"] for p in per) / max(detectable, 1),
            "lost_gapped": sum(p["lost_gapped"] for p in per) / max(detectable, 1),
            "lost_included": sum(p["lost_included_gapped"] for p in per) / max(includable, 1),
            "homologs_passed": sum(p["homologs_gapped"] for p in per) / max(sum(r["homologs"] for r in rows), 1),
            "seconds": float(np.mean([p["seconds"] for p in per])),
        })
    return out


def markdown(results: list[dict]) -> str:
    lines = [
        f"Written by `benchmarks/prefilter.py` on {time.strftime('%Y-%m-%d %H:%M')}: single-sequence profiles "
        "(iteration 1), one shard, 1 process. *Reduction* = database size / targets passing both stages. "
        "*Detectable* homologs are those an exhaustive Viterbi of the same profile (no prefilter, bias-corrected, "
        "the search's E-values) finds at E ≤ 10; *lost* = detectable homologs the prefilter drops (at E ≤ 1e-3: "
        "of the homologs Viterbi would include in the MSA). *Homologs passed*: all labelled homologs (Pfam: "
        "labelled pairs; CATH: same topology) that reach Viterbi, detectable or not. CPU s: gapless + gapped "
        "stages per query (the first query's calls include building the padded residue layout). Default settings "
        f"(bold): seed shape {DEFAULT_SHAPE} (a spaced 4-mer), seeds at {DEFAULT_BITS} bits, {DIAGONALS_PER_TARGET} "
        "diagonals per target, the gapless pass with the banded stage 1b; *HHblits' single pass*: the gapless pass "
        "at 2.5 + log2(Lq·Lt) bits alone; `1111` = contiguous 4-mers, `111` = 3-mers.", "",
        "| set (queries, database) | seed shape / seed bits / diagonals | seeded | gapless (+ band) pass | gapped pass | reduction "
        "| homologs passed | detectable lost (E ≤ 10) | lost of E ≤ 1e-3 | CPU s / query |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        for row in summarise(result):
            default = row["setting"] == setting_name(*GRID[0])
            label = f"**{row['setting']}**" if default else row["setting"]
            lines.append(
                f"| {result['set']} ({row['queries']}, {result['n_db']:,}) | {label} | {row['seeded']:.0f} | "
                f"{row['gapless']:.1f} | {row['gapped']:.1f} | {row['reduction']:.0f}× | "
                f"{row['homologs_passed']:.3f} | {row['lost_gapped']:.3f} ({row['detectable']}) | "
                f"{row['lost_included']:.3f} ({row['includable']}) | {row['seconds']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="pfam,cath")
    parser.add_argument("--queries", type=int, default=60, help="deterministic query subsample per set")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    results = [run_set(name, args.queries) for name in args.sets.split(",")]
    WORK.mkdir(parents=True, exist_ok=True)
    write_text_atomic(WORK / "results.json", json.dumps(results, indent=1))
    text = markdown(results)
    print(text)
    if not args.no_write:
        report.write_section(RESULTS, SECTION, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
