"""The fast setting's seed budget against a Swiss-Prot-sized database: CPU per query against MSA depth and Neff.

The seed budget (``--seed-budget``, ``search.seed_budget``) caps the seeds a query counts per residue over the
whole database (:func:`workflow_lib.search.gapless.strongest_seeds`); only databases above about 25 M residues
reach it. This script runs ``trackfold msa`` with the fast setting (``--no-sensitive --pseudocounts
substitution``, 3 iterations) at each budget of ``--budgets`` on the fixed *E. coli* sample of
``benchmarks/uniprot_cost.py`` (``--proteins``), one process per budget on 1 CPU, ``--parallel`` at a time, and
reports CPU seconds per query, depth and Neff after the output filter (the same functions as
``uniprot_cost.py``) and, per budget, how many queries lost or gained rows against the first budget. Writes the
section "## Homology search: the seed budget against UniProt-2014" of benchmarks/RESULTS.md (``--no-write`` to
print only)::

    .venv/bin/python benchmarks/seed_budget.py --db SEQ_DB [--budgets 32000,16000,8000] [--proteins 100] \\
        [--parallel 2]

HHblits-style iterative search (Remmert et al. 2012, Nat. Methods 9:173) — this script measures it, it implements
nothing of it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from search import machine  # noqa: E402
from search_bench import report  # noqa: E402
from uniprot_cost import FAST, ecoli_sample, trackfold_msa  # noqa: E402
from workflow_lib.seqio.atomic import write_text_atomic  # noqa: E402

WORK = ROOT / "benchmarks" / "_work" / "seed_budget"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## Homology search: the seed budget against UniProt-2014"


def markdown(results: dict) -> str:
    rows = results["budgets"]
    first = rows[0]
    lines = [f"Written by `benchmarks/seed_budget.py` on {results['finished']}. Machine: {results['machine']}; each "
             f"budget one `trackfold msa` process on 1 CPU, {results['parallel']} at a time: compare CPU seconds "
             "within this table.", "",
             f"{results['proteins']} *E. coli* K-12 proteins (the fixed sample of `uniprot_cost.py`, "
             f"{results['residues']:,} residues) against {results['database']} ({results['sequences']:,} sequences, "
             f"{results['db_residues'] / 1e6:.0f} M residues), fast setting, 3 iterations. Depth and Neff after the "
             "output filter (90% identity, 50% coverage).", "",
             "| seed budget (seeds per query residue) | CPU s / query | × first row | depth median / mean | Neff mean "
             "| queries with fewer rows / more | rows lost, largest single query | peak RSS MiB |",
             "|---|---|---|---|---|---|---|---|"]
    base_depth = np.array(first["depth"])
    for row in rows:
        depth = np.array(row["depth"])
        neff = np.array(row["neff"])
        change = depth - base_depth
        lines.append(f"| {row['budget']:,} | {row['cpu_s'] / results['proteins']:.2f} | "
                     f"{row['cpu_s'] / first['cpu_s']:.2f} | {np.median(depth):g} / {depth.mean():.1f} | "
                     f"{neff.mean():.3f} | {int((change < 0).sum())} / {int((change > 0).sum())} | "
                     f"{int(max(0, -change.min()))} | {row['peak_rss_kib'] / 1024:.0f} |")
    lines += ["", "Command per budget: `.venv/bin/python -m workflow_lib msa --db SEQ_DB --out-dir OUT --cpus 1 "
              f"{' '.join(FAST)} --seed-budget B queries_{results['proteins']}.fasta`", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, type=Path, help="sequence database (trackfold db build)")
    parser.add_argument("--budgets", default="32000,16000,8000", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--proteins", type=int, default=100)
    parser.add_argument("--parallel", type=int, default=1, help="budgets run at a time (one core each)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    sample, queries = ecoli_sample(args.proteins, WORK)
    names = [r.id for r in sample]

    def run(budget: int) -> dict:
        print(f"[seed-budget] {budget}: running", file=sys.stderr, flush=True)
        row = trackfold_msa(WORK / f"budget_{budget}", args.db, queries, names,
                            [*FAST, "--seed-budget", str(budget)])
        row["budget"] = budget
        print(f"[seed-budget] {budget}: {row['cpu_s'] / len(sample):.2f} CPU-s/query", file=sys.stderr, flush=True)
        return row

    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        rows = list(pool.map(run, args.budgets))
    manifest = json.loads((args.db / "manifest.json").read_text())
    results = {"finished": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(), "proteins": len(sample),
               "residues": sum(len(r.sequence) for r in sample), "database": args.db.name,
               "sequences": int(manifest["total_sequences"]), "db_residues": int(manifest["total_residues"]),
               "parallel": max(1, args.parallel), "budgets": rows}
    write_text_atomic(WORK / "results.json", json.dumps(results, indent=1))
    text = markdown(results)
    print(text)
    if not args.no_write:
        report.write_section(RESULTS, SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
