"""Gumbel λ of context-specific profiles against reversed real proteins, for a λ model in Neff and length
(``workflow_lib.search.evalue``; "E-values of context-specific profiles" in ``benchmarks/RESULTS.md``).

    .venv/bin/python benchmarks/context_lambda.py [--queries 30] [--samples 1000] [--cpus 2]

Profiles: single-sequence context profiles of the Pfam *tuning* queries (ranks 250–500 of the benchmark's
deterministic order, disjoint from its 250 queries) and context profiles of the held-out *E. coli* MSAs in
``tests/data/search/context`` (Neff > 1). Each is scored against ``--samples`` windows of 200 residues of the
shipped reversed proteins; (μ, λ) are fitted by maximum likelihood to ``S − log2(200)``. Prints one row per
profile and the least-squares fit ``λ = a + b log2(Neff) + d log2(L)``.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from search_bench import datasets  # noqa: E402
from workflow_lib.aligner import align_targets, profile_from_alignment, profile_from_sequence  # noqa: E402
from workflow_lib.aligner.context import load_context_model  # noqa: E402
from workflow_lib.search.evalue import decoy_windows, fit_gumbel, load_decoy_pool  # noqa: E402
from workflow_lib.seqio.msa import read_a3m  # noqa: E402


def tuning_queries(shared: Path, count: int) -> list[tuple[str, str]]:
    dataset = datasets.load_pfam(shared)
    ranked = sorted(dataset.query_ids, key=lambda name: hashlib.sha1(f"pfam:{name}".encode()).hexdigest())
    chosen = set(ranked[250:500])
    return [(name, seq) for name, seq in dataset.database if name in chosen][:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--cpus", type=int, default=2)
    args = parser.parse_args(argv)
    context = load_context_model()
    pool = load_decoy_pool()
    profiles = [(name, profile_from_sequence(seq, context=context))
                for name, seq in tuning_queries(args.shared, args.queries)]
    for path in sorted((ROOT / "tests" / "data" / "search" / "context").glob("*.a3m")):
        profiles.append((path.stem, profile_from_alignment(read_a3m(path), context=context)))
    rows = []
    for k, (name, profile) in enumerate(profiles):
        windows = decoy_windows(pool, 200.0, args.samples, 7919 + k)
        scores = np.array([hit.score for hit in align_targets(profile, windows, cpus=args.cpus)]) - np.log2(200.0)
        mu, lam = fit_gumbel(scores)
        rows.append((name, profile.neff, profile.length, mu, lam))
        print(f"{name}\tneff {profile.neff:.2f}\tlength {profile.length}\tmu {mu:.2f}\tlambda {lam:.3f}", flush=True)
    neff = np.array([r[1] for r in rows])
    length = np.array([r[2] for r in rows])
    lam = np.array([r[4] for r in rows])
    design = np.column_stack([np.ones_like(lam), np.log2(np.maximum(neff, 1.0)), np.log2(length)])
    coefficients, *_ = np.linalg.lstsq(design, lam, rcond=None)
    residual = float(np.sqrt(np.mean((design @ coefficients - lam) ** 2)))
    print(f"lambda = {coefficients[0]:.3f} + {coefficients[1]:.3f} log2(Neff) + {coefficients[2]:.3f} log2(L); "
          f"residual {residual:.3f}; {len(rows)} profiles, lambda {lam.min():.2f}-{lam.max():.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
