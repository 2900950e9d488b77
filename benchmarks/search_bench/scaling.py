"""How cost grows: time per query and peak memory against database size and queries per job.

Database: Swiss-Prot subset(s) of shared/data/swissprot_subsets_prokka (default ``sprot_Archaea``, 2,872
sequences) at 1×, 4× and 16×: the real sequences plus 3 or 15 residue-shuffled copies of each (copy k of
sequence i is shuffled with ``numpy.random.default_rng([k, i])``, ID ``{id}__shuf{k}``), so composition and
length distribution stay those of the real set while the copies add no homologs. Queries: a deterministic
subsample of the *E. coli* K-12 proteome (nested: the 10 are among the 100, the 100 among the 1,000).

Two sweeps: database size at a fixed number of queries per job (``--scaling-db-queries``, default 10) and
queries per job (10, 100, 1,000) against the 1× database. Each job runs once, 1 CPU, under ``nice -n 10``.
The growth exponent b in (CPU s/query) ∝ (database residues)^b is fitted between the smallest and largest
database; b < 1 means the cost grows slower than the database (the k-mer prefilter's promise).
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from workflow_lib.errors import InputError
from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.seqio.fasta import iter_fasta

from . import report, tools
from .datasets import stable_subsample

SECTION = "## Homology search: how cost grows"


def base_records(shared: Path, names: str) -> list[tuple[str, str]]:
    records: dict[str, str] = {}
    for name in names.split("+"):
        path = shared / "swissprot_subsets_prokka" / f"{name}.fasta.gz"
        if not path.exists():
            raise InputError("no such Swiss-Prot subset (see shared/data/SOURCES.md)", path=path)
        for record in iter_fasta(path, allow_duplicates=True):
            records.setdefault(record.id, record.sequence)
    return list(records.items())


def replicated(records: list[tuple[str, str]], factor: int) -> list[tuple[str, str]]:
    """The records followed by ``factor - 1`` residue-shuffled copies of each (deterministic)."""
    if factor < 1:
        raise InputError(f"database factor must be ≥ 1, got {factor}")
    out = list(records)
    for copy in range(1, factor):
        for index, (name, sequence) in enumerate(records):
            residues = np.frombuffer(sequence.encode(), dtype=np.uint8).copy()
            np.random.default_rng([copy, index]).shuffle(residues)
            out.append((f"{name}__shuf{copy}", residues.tobytes().decode()))
    return out


def run(args, shared: Path, work: Path, results: Path, machine: str) -> int:
    work.mkdir(parents=True, exist_ok=True)
    base = base_records(shared, args.scaling_base)
    proteome = [(r.id, r.sequence) for r in
                iter_fasta(shared / "proteome_ecoli_k12" / "UP000000625_83333.fasta.gz")]
    jobs = sorted({(f, args.scaling_db_queries) for f in args.scaling_factors}
                  | {(min(args.scaling_factors), n) for n in args.scaling_queries})
    candidates = [tools.MMseqs(widen_prefilter=False) if t.name == "mmseqs" else t for t in tools.all_tools()]
    selected = [t for t in candidates if t.name in args.scaling_tools]
    rows = []
    for tool in selected:
        ok, why = tool.available()
        if not ok:
            rows.append({"tool": tool.label, "status": why})
            continue
        for factor, n_queries in jobs:
            database = replicated(base, factor)
            db_fasta = tools.write_records(work / f"db_{factor}x.fasta", database)
            ids = stable_subsample([name for name, _ in proteome], n_queries, salt="scaling")
            chosen = set(ids)
            query_fasta = tools.write_records(work / f"queries_{n_queries}.fasta",
                                           [q for q in proteome if q[0] in chosen])
            print(f"[search-bench] scaling {tool.name}: {factor}x database, {n_queries} queries",
                  file=sys.stderr, flush=True)
            record = tool.run(query_fasta, db_fasta, work / f"{tool.name}_{factor}x", n_queries, len(database),
                              force=tool.name in args.force, search_name=f"search_{n_queries}q")
            rows.append({"tool": tool.label, "name": tool.name, "status": "ok", "factor": factor,
                         "db_sequences": len(database), "db_residues": sum(len(s) for _, s in database),
                         "queries": n_queries, "query_residues": sum(len(s) for n, s in proteome if n in chosen),
                         "record": record})
    write_text_atomic(work / "scaling.json", json.dumps(rows, indent=1, default=float))
    text = markdown(rows, args, machine)
    print(text)
    if not args.no_write:
        report.write_section(results, SECTION, text)
    return 0


def growth_exponent(points: list[tuple[float, float]]) -> float:
    """b of y ∝ x^b between the smallest and the largest x."""
    points = sorted(points)
    (x0, y0), (x1, y1) = points[0], points[-1]
    if x1 <= x0 or y0 <= 0 or y1 <= 0:
        return float("nan")
    return math.log(y1 / y0) / math.log(x1 / x0)


def markdown(rows: list[dict], args, machine: str) -> str:
    parts = [f"Written by `benchmarks/search.py --scaling` on {time.strftime('%Y-%m-%d %H:%M')}. Machine: {machine}; "
             "shared with other jobs, so compare CPU seconds. Database: "
             f"`{args.scaling_base}` (Swiss-Prot, shared/data/swissprot_subsets_prokka) at "
             f"{', '.join(f'{f}×' for f in args.scaling_factors)} (real sequences + residue-shuffled copies); "
             "queries: deterministic subsamples of the *E. coli* K-12 proteome. 1 CPU per job, `nice -n 10`. "
             "Time per query = search time of the job / queries (database build apart).", "",
             "| tool | DB | DB sequences | DB residues | queries per job | search s (wall) | s/query (wall) | "
             "CPU s/query | peak RSS MiB | DB build s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if row["status"] != "ok":
            parts.append(f"| {row['tool']} | {row['status']} | | | | | | | | |")
            continue
        search, build = row["record"]["search"], row["record"]["build"]
        n = row["queries"]
        build_s = f"{build['wall_s']:.1f}" if build["commands"] else "–"
        parts.append(f"| {row['tool']} | {row['factor']}× | {row['db_sequences']:,} | {row['db_residues']:,} | {n} | "
                     f"{search['wall_s']:.1f} | {search['wall_s'] / n:.3f} | {search['cpu_s'] / n:.3f} | "
                     f"{search['peak_rss_kib'] / 1024:.0f} | {build_s} |")
    parts.append("")
    for name in sorted({r["name"] for r in rows if r["status"] == "ok"}):
        mine = [r for r in rows if r["status"] == "ok" and r["name"] == name]
        db_sweep = [(r["db_residues"], r["record"]["search"]["cpu_s"] / r["queries"]) for r in mine
                    if r["queries"] == args.scaling_db_queries]
        q_sweep = sorted((r["queries"], r["record"]["search"]["cpu_s"] / r["queries"]) for r in mine
                         if r["factor"] == min(args.scaling_factors))
        label = mine[0]["tool"]
        if len(db_sweep) > 1:
            exponent = growth_exponent(db_sweep)
            parts.append(f"- {label}: CPU time per query grows as (database residues)^{exponent:.2f} from "
                         f"{min(args.scaling_factors)}× to {max(args.scaling_factors)}× "
                         f"({'below' if exponent < 1 else 'not below'} linear).")
        if len(q_sweep) > 1:
            parts.append(f"- {label}: CPU s/query {q_sweep[0][1]:.3f} at {q_sweep[0][0]} queries per job vs "
                         f"{q_sweep[-1][1]:.3f} at {q_sweep[-1][0]} (batching gains ×{q_sweep[0][1] / q_sweep[-1][1]:.1f}).")
    if not any(r.get("name") == "trackfold" and r["status"] == "ok" for r in rows):
        parts.append("- trackfold: **not yet run** here. Fill its rows with `.venv/bin/python benchmarks/search.py "
                     "--scaling` (the peers are read back from the cache).")
    return "\n".join(parts)
