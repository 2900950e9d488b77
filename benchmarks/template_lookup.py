"""Template search: column scores looked up from a batch's distinct template columns, against one score per cell.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/template_lookup.py --templates TEMPLATE_DB \
        --a3m-dir A3M_DIR [--queries 60] [--seed 0] [--out template_lookup.md]

A template database built without template MSAs (the workflow's PDB template database) holds profiles made
from one sequence each: their columns are about 20 distinct emission rows, one per residue type. The compiled
profile–profile Viterbi then scores a query row against those rows once and looks the column scores up
(:func:`~workflow_lib.aligner.hmm_kernels.distinct_columns`) instead of a matrix product and a logarithm per cell
(HHsearch's column score, Söding 2005, Bioinformatics 21:951).

Both ways search the same random sample of ``--queries`` A3Ms in one process, alternating per query
(:func:`~workflow_lib.templates.search.search_templates` with the workflow's defaults; the per-cell way is the
same search with ``distinct_columns`` switched off). Reported: CPU seconds per query (``time.process_time``; the
database, its profiles, decoys and k-mer index loaded and numba's kernels compiled before timing), per query
length bin, and how many hit tables and null models are identical.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workflow_lib.aligner import hmm_kernels  # noqa: E402
from workflow_lib.aligner.profile import profile_from_alignment  # noqa: E402
from workflow_lib.seqio.msa import a3m_stem, read_a3m  # noqa: E402
from workflow_lib.templates.calibration import DEFAULT_DECOYS  # noqa: E402
from workflow_lib.templates.database import load_template_db  # noqa: E402
from workflow_lib.templates.search import DEFAULT_MAX_CANDIDATES, search_templates  # noqa: E402

LENGTH_BINS = (0, 200, 400, 800, 100_000)
BIN_LABELS = ("< 200", "200–399", "400–799", "≥ 800")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--templates", required=True, help="template database directory")
    parser.add_argument("--a3m-dir", required=True, help="folder of query A3Ms (a random sample is searched)")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="also write the tables (Markdown) here")
    args = parser.parse_args()

    database = load_template_db(args.templates)
    paths = sorted(Path(args.a3m_dir).glob("*.a3m"))
    if not paths:
        parser.error(f"no .a3m files in {args.a3m_dir}")
    rng = np.random.default_rng(args.seed)
    paths = [paths[k] for k in sorted(rng.choice(len(paths), min(args.queries, len(paths)), replace=False))]
    queries = [profile_from_alignment(read_a3m(path), name=a3m_stem(path)) for path in paths]
    database.prefilter_arrays  # noqa: B018  (built once, outside the timings)
    database.decoys(DEFAULT_DECOYS, 0)
    search_templates(queries[0], database)   # numba compiles (or loads its cache) outside the timings

    lookup = hmm_kernels.distinct_columns
    rows, identical = [], 0
    for number, query in enumerate(queries, 1):
        results = {}
        for way, columns in (("lookup", lookup), ("per cell", lambda stacked: None)):
            hmm_kernels.distinct_columns = columns
            started = time.process_time()
            found = search_templates(query, database)
            results[way] = (time.process_time() - started, found)
        hmm_kernels.distinct_columns = lookup
        (fast, (hits, null)), (slow, (reference, reference_null)) = results["lookup"], results["per cell"]
        same = hits.equals(reference) and (null.lam, null.mu) == (reference_null.lam, reference_null.mu)
        identical += same
        rows.append({"length": query.length, "lookup": fast, "per cell": slow})
        print(f"{number}/{len(queries)} {query.name} L={query.length}: {slow:.2f} -> {fast:.2f} s, "
              f"{'identical' if same else 'DIFFERENT'}", flush=True)

    frame = pd.DataFrame(rows)
    frame["bin"] = pd.cut(frame["length"], LENGTH_BINS, right=False, labels=BIN_LABELS)
    lines = ["| query length | queries | per cell, CPU s per query | lookup | ratio |", "|---|---|---|---|---|"]
    for label, part in list(frame.groupby("bin", observed=True)) + [("all", frame)]:
        lines.append(f"| {label} | {len(part)} | {part['per cell'].mean():.3f} | {part['lookup'].mean():.3f} | "
                     f"{part['per cell'].mean() / part['lookup'].mean():.2f}× |")
    text = "\n".join([
        f"`OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/template_lookup.py --templates "
        f"{args.templates} --a3m-dir {args.a3m_dir} --queries {args.queries} --seed {args.seed}`: "
        f"{len(queries)} queries (median length {int(frame['length'].median())}) against {len(database):,} "
        f"templates, one thread, {DEFAULT_MAX_CANDIDATES} prefilter candidates, {DEFAULT_DECOYS} decoys, the two "
        f"ways alternating per query.", "", *lines, "",
        f"Hit tables and null models identical: {identical} of {len(queries)}.", ""])
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
