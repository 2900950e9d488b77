"""Template search cost: score-only ranking with traceback of the best hits, against tracing every candidate.

    python benchmarks/template_search_cost.py --templates TEMPLATE_DB --a3m-dir A3M_DIR [--queries 35]
        [--out template_search_cost.md]

Two searches of the same query profiles on the same loaded database, in one process (run it with one thread:
``OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1``):

- **traceback of every candidate** (the search before score-only ranking, rebuilt here from its pieces): the
  null model fitted on the query's Viterbi + correlation scores (HHsearch, Söding 2005, Bioinformatics 21:951)
  against 200 shuffled templates, each aligned with traceback; every prefilter candidate aligned with traceback
  and the same score; hits with at least ``min_aligned`` aligned columns ranked by E-value;
- **score-only ranking** (:func:`~workflow_lib.templates.search.search_templates`): decoys and candidates scored
  without traceback (:func:`~workflow_lib.aligner.hmm_compiled.hmm_scores`; as HH-suite3, Steinegger et al.
  2019, BMC Bioinformatics 20:473), E-values from the Viterbi score, traceback only for the best candidates.

Reported per search: CPU seconds per query (``time.process_time``; the database, its profiles and its k-mer
index are loaded before timing, numba's kernels compiled before timing), the agreement of the best and the
best two templates with the first search (the network uses the best two), recall of the first search's hits at
E <= 1e-3 and E <= 1 (found when the second search reports the template at all), the Spearman correlation of
the E-values of the templates both report, and the fraction of held-out shuffled templates (another seed) with
P < 0.05 under each search's own null (calibrated: 5%). A second table gives the per-job fixed cost: reading
the database and building its template profiles, row by row through ``DataFrame.iloc`` (as before) and from
whole columns (:attr:`~workflow_lib.templates.database.TemplateDatabase.profiles`).
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

from workflow_lib.aligner.hmm_compiled import hmm_scores  # noqa: E402
from workflow_lib.aligner.lanes import align_profiles  # noqa: E402
from workflow_lib.aligner.profile import Profile, profile_from_alignment  # noqa: E402
from workflow_lib.seqio.alphabet import encode  # noqa: E402
from workflow_lib.seqio.msa import a3m_stem, read_a3m  # noqa: E402
from workflow_lib.templates.calibration import (DEFAULT_DECOYS, NullModel, decoy_profiles, decoy_scores,  # noqa: E402
                                                fit_gumbel)
from workflow_lib.templates.database import TemplateDatabase, load_template_db  # noqa: E402
from workflow_lib.templates.search import (DEFAULT_MAX_CANDIDATES, DEFAULT_MAX_HITS, DEFAULT_MIN_ALIGNED,  # noqa: E402
                                           pair_scores, prefilter_candidates, search_templates)

THRESHOLDS = (1e-3, 1.0)
HELD_OUT_SEED = 99


def trace_every_candidate(query: Profile, database: TemplateDatabase) -> tuple[pd.DataFrame, NullModel]:
    """The search before score-only ranking (module docstring): ``template``, ``evalue``, ``bitscore`` of the
    best :data:`DEFAULT_MAX_HITS` hits, and the null model."""
    templates = database.profiles
    decoys = decoy_profiles(templates, DEFAULT_DECOYS, seed=0)
    null = fit_gumbel(np.array([hit.score for hit in align_profiles(query, decoys)]),
                      np.array([d.length for d in decoys]))
    chosen = [templates[k] for k in prefilter_candidates(query, database, DEFAULT_MAX_CANDIDATES)]
    rows = []
    for hit, template in zip(align_profiles(query, chosen) if chosen else [], chosen):
        if hit.aligned_columns < DEFAULT_MIN_ALIGNED:
            continue
        identical, positive = pair_scores(query.sequence, template.sequence, hit.pairs)
        pvalue = float(null.pvalue(hit.score, template.length))
        rows.append({"template": template.name, "evalue": len(templates) * pvalue, "bitscore": hit.score,
                     "identity": float(identical.mean()), "similarity": float(positive.mean()),
                     "alignment": hit.states})
    frame = pd.DataFrame(rows, columns=["template", "evalue", "bitscore", "identity", "similarity", "alignment"])
    frame = frame.sort_values(["evalue", "bitscore", "template"], ascending=[True, False, True], kind="stable")
    return frame.head(DEFAULT_MAX_HITS).reset_index(drop=True), null


def profiles_by_row(database: TemplateDatabase) -> list[Profile]:
    """The template profiles as built before: one ``DataFrame.iloc`` row and copied arrays per template."""
    profiles = []
    a = database.arrays
    for k in range(len(database)):
        row = database.chains.iloc[k]
        p0, length = int(row["profile_offset"]), int(row["length"])
        q0 = p0 + k
        profiles.append(Profile(str(row["template"]), encode(str(row["sequence"])),
                                a["emissions"][p0:p0 + length].copy(), a["transitions"][q0:q0 + length + 1].copy(),
                                a["column_neff"][q0:q0 + length + 1].copy(), float(row["neff"]),
                                a["background"][k].copy(), True))
    return profiles


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties)."""
    def ranks(values: np.ndarray) -> np.ndarray:
        order = np.argsort(values, kind="stable")
        ranked = np.empty(values.size, dtype=np.float64)
        ranked[order] = np.arange(values.size, dtype=np.float64)
        _, inverse = np.unique(values, return_inverse=True)
        return np.bincount(inverse, ranked)[inverse] / np.bincount(inverse)[inverse]
    if x.size < 3:
        return float("nan")
    return float(np.corrcoef(ranks(x), ranks(y))[0, 1])


def held_out_fraction(null: NullModel, scores: np.ndarray, lengths: np.ndarray) -> float:
    return float(np.mean(null.pvalue(scores, lengths) < 0.05))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--templates", required=True, help="template database directory")
    parser.add_argument("--a3m-dir", required=True, help="query A3Ms (the first --queries of them, sorted)")
    parser.add_argument("--queries", type=int, default=35)
    parser.add_argument("--out", type=Path, help="also write the tables (Markdown) here")
    args = parser.parse_args()

    start = time.process_time()
    database = load_template_db(args.templates)
    load_seconds = time.process_time() - start
    start = time.process_time()
    by_row = profiles_by_row(database)
    by_row_seconds = time.process_time() - start
    del by_row
    start = time.process_time()
    templates = database.profiles
    by_column_seconds = time.process_time() - start
    database.prefilter_arrays  # built once, outside the timings  # noqa: B018
    hmm_scores(templates[0], templates[:2])    # numba compiles (or loads its cache) outside the timings
    held_out = decoy_profiles(templates, DEFAULT_DECOYS, seed=HELD_OUT_SEED)
    held_lengths = np.array([d.length for d in held_out], dtype=np.float64)

    paths = sorted(Path(args.a3m_dir).glob("*.a3m"))[:args.queries]
    seconds = {"old": [], "new": []}
    runs: dict[str, list[pd.DataFrame]] = {"old": [], "new": []}
    calibration: dict[str, list[float]] = {"old": [], "new": []}
    for number, path in enumerate(paths, 1):
        query = profile_from_alignment(read_a3m(path), name=a3m_stem(path))
        started = time.process_time()
        old, old_null = trace_every_candidate(query, database)
        seconds["old"].append(time.process_time() - started)
        started = time.process_time()
        new, new_null = search_templates(query, database)
        seconds["new"].append(time.process_time() - started)
        runs["old"].append(old)
        runs["new"].append(new)
        old_scores = np.array([hit.score for hit in align_profiles(query, held_out)])
        calibration["old"].append(held_out_fraction(old_null, old_scores, held_lengths))
        calibration["new"].append(held_out_fraction(new_null, decoy_scores(query, held_out), held_lengths))
        print(f"{number}/{len(paths)} {query.name} L={query.length}: {seconds['old'][-1]:.2f} s -> "
              f"{seconds['new'][-1]:.2f} s; best {list(old['template'][:2])} -> {list(new['template'][:2])}",
              flush=True)

    table = report(runs, seconds, calibration)
    fixed = "\n".join([
        "| per job (19,887-chain database) | CPU s |",
        "|---|---|",
        f"| read the database (chains table, arrays npz) | {load_seconds:.2f} |",
        f"| template profiles, row by row (`DataFrame.iloc`, copies) | {by_row_seconds:.2f} |",
        f"| template profiles, whole columns (views) | {by_column_seconds:.2f} |",
    ])
    text = "\n".join([
        f"`OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/template_search_cost.py --templates "
        f"{args.templates} --a3m-dir {args.a3m_dir} --queries {args.queries}`: {len(paths)} queries against "
        f"{len(database):,} templates, one thread, max_hits {DEFAULT_MAX_HITS}, min_aligned {DEFAULT_MIN_ALIGNED}, "
        f"{DEFAULT_MAX_CANDIDATES} prefilter candidates, {DEFAULT_DECOYS} decoys.",
        "", table, "", fixed, ""])
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


def report(runs: dict[str, list[pd.DataFrame]], seconds: dict[str, list[float]],
           calibration: dict[str, list[float]]) -> str:
    """The Markdown table comparing the two searches (the first is the reference)."""
    old_runs, new_runs = runs["old"], runs["new"]
    top1 = np.mean([list(o["template"][:1]) == list(n["template"][:1]) for o, n in zip(old_runs, new_runs)])
    top2 = np.mean([set(o["template"][:2]) == set(n["template"][:2]) for o, n in zip(old_runs, new_runs)])
    significant = [k for k, o in enumerate(old_runs) if len(o) and o["evalue"].iloc[0] <= 1e-3]
    top2_significant = np.mean([set(old_runs[k]["template"][:2]) == set(new_runs[k]["template"][:2])
                                for k in significant]) if significant else float("nan")
    recalls = []
    for threshold in THRESHOLDS:
        wanted = found = 0
        for old, new in zip(old_runs, new_runs):
            expected = set(old["template"][old["evalue"] <= threshold])
            wanted += len(expected)
            found += len(expected & set(new["template"]))
        recalls.append(f"{found}/{wanted} ({found / wanted:.1%})" if wanted else "-")
    pairs = [(o.set_index("template")["evalue"], n.set_index("template")["evalue"]) for o, n in zip(old_runs, new_runs)]
    shared = [(o[t], n[t]) for o, n in pairs for t in o.index.intersection(n.index)]
    rho = spearman(*(np.log10(np.maximum(np.array(v), 1e-300)) for v in zip(*shared))) if shared else float("nan")

    def row(label: str, key: str, agreement: list[str]) -> str:
        per_query = np.array(seconds[key])
        hits = np.mean([(r["evalue"] <= 1e-3).sum() for r in runs[key]])
        return " | ".join([f"| {label}", f"{per_query.mean():.2f}", f"{np.median(per_query):.2f}",
                           f"{per_query.max():.2f}", *agreement, f"{hits:.1f}",
                           f"{np.mean(calibration[key]):.1%} |"])

    return "\n".join([
        "| search | CPU s per query | median | max | top-1 same | top-2 same | top-2 same, best E<=1e-3 | "
        "recall E<=1e-3 | recall E<=1 | Spearman E | hits E<=1e-3 per query | held-out P<0.05 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        row("traceback of every candidate, Viterbi + correlation score", "old", ["reference"] + ["-"] * 5),
        row("score-only ranking, traceback of the best, Viterbi score", "new",
            [f"{top1:.0%}", f"{top2:.0%}", f"{top2_significant:.0%} of {len(significant)}", *recalls,
             f"{rho:.3f} ({len(shared)} shared)"]),
    ])


if __name__ == "__main__":
    raise SystemExit(main())
