"""Sub-command ``trackfold features``: one A3M in, one ``{stem}.npz`` feature file out, per input."""

from __future__ import annotations

import argparse
from pathlib import Path

from workflow_lib.errors import InputError
from workflow_lib.features.build import build_features, write_features
from workflow_lib.features.msa_features import DEFAULT_MAX_SEQS, DEFAULT_MAX_STATS_SEQS

_SUFFIXES = (".a3m.gz", ".a3m")


def feature_stem(path: str | Path) -> str:
    """Output stem of an A3M: the file name without ``.a3m`` / ``.a3m.gz`` (else without its last suffix)."""
    name = Path(path).name
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[:-len(suffix)]
    return Path(name).stem


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    features = subparsers.add_parser("features", help="A3M files -> per-protein feature npz files")
    features.add_argument("a3m", nargs="+", help="A3M alignments, query first (plain or .gz)")
    features.add_argument("--out-dir", required=True, help="directory for {stem}.npz")
    features.add_argument("--max-seqs", type=_positive, default=DEFAULT_MAX_SEQS,
                          help=f"MSA rows kept for the network, query included (default {DEFAULT_MAX_SEQS})")
    features.add_argument("--max-stats-seqs", type=_positive, default=DEFAULT_MAX_STATS_SEQS,
                          help="rows the weights, profile and co-evolution are computed from "
                               f"(default {DEFAULT_MAX_STATS_SEQS}; at least --max-seqs)")
    features.add_argument("--seed", type=int, default=0, help="salt of the deterministic row sampling")
    features.set_defaults(handler=run_features)


def run_features(args: argparse.Namespace) -> int:
    if args.max_stats_seqs < args.max_seqs:
        raise InputError(f"--max-stats-seqs ({args.max_stats_seqs}) is smaller than --max-seqs ({args.max_seqs})")
    stems: dict[str, str] = {}
    for path in args.a3m:
        stem = feature_stem(path)
        if stem in stems:
            raise InputError(f"writes the same {stem}.npz as {stems[stem]}", path=path)
        stems[stem] = path
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stem, path in stems.items():
        features = build_features(path, max_seqs=args.max_seqs, max_stats_seqs=args.max_stats_seqs, seed=args.seed)
        out = out_dir / f"{stem}.npz"
        write_features(out, features)
        depth, length = features["msa"].shape
        print(f"{out}: N={depth} (of {int(features['num_alignments'])}) L={length} "
              f"Neff={float(features['neff']):.1f}")
    return 0
