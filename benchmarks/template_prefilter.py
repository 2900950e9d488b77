"""Template search against a large template database: the prefilter's recall and cost against a full Viterbi scan.

    python benchmarks/template_prefilter.py --templates SCRATCH/templates_promod3/single \\
        --a3m-dir SCRATCH/promod3_msas/msas --queries 24 [--caps 100,300,1000] [--results benchmarks/RESULTS.md]

Queries: a fixed sample (seeded) of A3Ms of template chains (MSAs of the chains themselves, as the template
build uses); each query's own template is left out of the comparison, so what is measured is how many *other*
templates the prefilter keeps. For every query the exhaustive scan (``prefilter=False``) gives the reference
hits; each cap of prefilter candidates is then run on the same loaded database and compared: recall of the
reference's hits at E <= 1e-3 and at E <= 1 (a reference hit counts as found when the prefiltered run reports
that template at all), the mean number of hits per query, and seconds per query (one core; the database load,
profiles and k-mer index are built once before timing, as in a per-chunk job).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search_bench.report import publish  # noqa: E402
from workflow_lib.aligner.profile import profile_from_alignment  # noqa: E402
from workflow_lib.seqio.msa import a3m_stem, read_a3m  # noqa: E402
from workflow_lib.templates.database import load_template_db  # noqa: E402
from workflow_lib.templates.search import search_templates  # noqa: E402

SECTION = "## Template search: prefilter against a full scan of 19,887 PDB chains"
THRESHOLDS = (1e-3, 1.0)
MAX_HITS = 100


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--templates", required=True, help="template database directory")
    parser.add_argument("--a3m-dir", required=True, help="folder searched recursively for {template}.a3m")
    parser.add_argument("--queries", type=int, default=24)
    parser.add_argument("--caps", default="100,300,1000", help="max_candidates values compared")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--machine", default="AMD EPYC", help="named in the written section")
    parser.add_argument("--results", type=Path, help="write the table into this Markdown file")
    args = parser.parse_args()
    caps = [int(c) for c in args.caps.split(",")]

    database = load_template_db(args.templates)
    known = set(database.ids)
    a3ms = sorted(p for p in Path(args.a3m_dir).rglob("*.a3m") if a3m_stem(p) in known)
    rng = np.random.default_rng(args.seed)
    sample = [a3ms[i] for i in sorted(rng.choice(len(a3ms), size=min(args.queries, len(a3ms)), replace=False))]
    database.profiles, database.prefilter_arrays  # built once, outside the timings  # noqa: B018

    runs = {"full": []} | {cap: [] for cap in caps}
    seconds = {key: 0.0 for key in runs}
    for number, path in enumerate(sample, 1):
        name = a3m_stem(path)
        query = profile_from_alignment(read_a3m(path), name=name)
        for key in runs:
            start = time.perf_counter()
            hits, _ = search_templates(query, database, max_hits=MAX_HITS, prefilter=key != "full",
                                       max_candidates=key if key != "full" else 1)
            seconds[key] += time.perf_counter() - start
            hits = hits[hits["template"] != name]
            runs[key].append(dict(zip(hits["template"], hits["evalue"])))
        print(f"{number}/{len(sample)} {name} L={query.length}: reference hits E<=1: "
              f"{sum(e <= 1 for e in runs['full'][-1].values())}", flush=True)

    rows = []
    for key in runs:
        recalls = []
        for threshold in THRESHOLDS:
            wanted = found = 0
            for reference, got in zip(runs["full"], runs[key]):
                expected = {t for t, e in reference.items() if e <= threshold}
                wanted += len(expected)
                found += len(expected & set(got))
            recalls.append(f"{found}/{wanted} ({found / wanted:.1%})" if wanted else "-")
        label = "full Viterbi scan" if key == "full" else f"prefilter, {key} candidates"
        rows.append(f"| {label} | {recalls[0]} | {recalls[1]} | "
                    f"{np.mean([sum(e <= 1 for e in r.values()) for r in runs[key]]):.1f} | "
                    f"{seconds[key] / len(sample):.2f} | {seconds['full'] / seconds[key]:.1f}x |")
    body = "\n".join([
        f"`python benchmarks/template_prefilter.py --templates TEMPLATE_DB --a3m-dir A3M_DIR --queries "
        f"{args.queries} --caps {args.caps}`, where TEMPLATE_DB is `trackfold templates build` of a template "
        f"source ({len(database):,} templates) and A3M_DIR holds MSAs of its chains (`trackfold msa`). "
        f"{args.machine}, one core per search. {len(sample)} queries (A3Ms of template chains, own template left "
        "out); recall of the full scan's hits (other templates) at two E-value thresholds.",
        "",
        "| search | recall E<=1e-3 | recall E<=1 | hits E<=1 per query | s per query | speed-up |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        "- E-values are the same in every run: they count all templates, prefiltered or not.",
    ])
    publish(body, args.results, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
