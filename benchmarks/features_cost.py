"""What the feature stage costs: CPU seconds per protein of ``trackfold features``, by part and by length.

    python benchmarks/features_cost.py --a3m-dir MSAS [--hits-dir HITS --templates TEMPLATE_DB]
        [--every 2] [--limit 60] [--max-seqs 1024] [--max-stats-seqs 16384] [--max-templates 2]

Each A3M of ``--a3m-dir`` (sorted by name, every ``--every``-th, at most ``--limit``) is built into a feature
file as ``trackfold features`` builds it (:func:`workflow_lib.features.build.build_features`, then
:func:`~workflow_lib.features.build.write_features` into a temporary folder), with the template hits
``{stem}.hits.parquet`` of ``--hits-dir`` where given. CPU seconds (``time.process_time``; run it with one
thread, ``OMP_NUM_THREADS=1``) are split into parts by timing the library's own calls:

- ``read``: parsing the A3M;
- ``msa``: the MSA features less the two below (row sampling, sequence weights, profile, deletions);
- ``coevolution``: covariance norm and mutual information (:func:`~workflow_lib.features.coevolution_features`);
- ``couplings``: direct couplings (:func:`~workflow_lib.features.coupling_features`);
- ``templates``: reading the hits and the template features;
- ``write``: validating and writing the compressed npz;
- ``other``: the rest (validating the feature dict).

The first protein is built twice and its first build is not counted, so that one-off costs (imports, compiled
kernels loaded from their cache) do not land on it. The report is a markdown table: proteins, mean L and depth,
and the mean CPU seconds per protein of each part and in total, per length bin and over all.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import importlib  # noqa: E402

build_module = importlib.import_module("workflow_lib.features.build")
msa_module = importlib.import_module("workflow_lib.features.msa_features")
from workflow_lib.features.msa_features import DEFAULT_MAX_SEQS, DEFAULT_MAX_STATS_SEQS  # noqa: E402
from workflow_lib.features.templates import DEFAULT_MAX_TEMPLATES  # noqa: E402
from workflow_lib.seqio.msa import a3m_stem  # noqa: E402
from workflow_lib.templates.database import load_template_db  # noqa: E402

PARTS = ("read", "msa", "coevolution", "couplings", "templates", "write")
LENGTH_BINS = (0, 150, 300, 500)


class PartClock:
    """CPU seconds spent inside wrapped library calls, by part, for the protein being built."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def wrap(self, module, name: str, part: str) -> None:
        function = getattr(module, name)

        def timed(*args, **kwargs):
            start = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[part] += time.process_time() - start

        setattr(module, name, timed)

    @contextlib.contextmanager
    def part(self, name: str):
        start = time.process_time()
        try:
            yield
        finally:
            self.seconds[name] += time.process_time() - start


def build_one(clock: PartClock, a3m: Path, out: Path, hits: Path | None, database, args) -> dict:
    clock.seconds.clear()
    start = time.process_time()
    features = build_module.build_features(a3m, max_seqs=args.max_seqs, max_stats_seqs=args.max_stats_seqs,
                                           templates=database if hits is not None else None,
                                           template_hits=hits, max_templates=args.max_templates)
    built = time.process_time()
    with clock.part("write"):
        build_module.write_features(out, features)
    seconds = dict(clock.seconds)
    seconds["msa"] = seconds.pop("msa_all", 0.0) - seconds.get("coevolution", 0.0) - seconds.get("couplings", 0.0)
    seconds["templates"] = seconds.get("templates", 0.0)
    seconds["total"] = built - start + seconds["write"]
    seconds["other"] = seconds["total"] - sum(seconds.get(part, 0.0) for part in PARTS)
    return {"length": int(features["msa"].shape[1]), "depth": int(features["num_alignments"]),
            "n_templates": int(features["template_mask"].size), **seconds}


def length_bin(length: int) -> str:
    edges = LENGTH_BINS + (None,)
    for low, high in zip(edges, edges[1:]):
        if high is None or length < high:
            return f"{low}–{high - 1}" if high is not None else f"≥ {low}"
    raise AssertionError("unreachable")


def table(rows: list[dict]) -> str:
    columns = PARTS + ("other", "total")
    lines = ["| L | proteins | mean L | mean depth | templates | " + " | ".join(columns) + " |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(columns)]
    groups = defaultdict(list)
    for row in rows:
        groups[length_bin(row["length"])].append(row)
    order = [length_bin(low) for low in LENGTH_BINS]
    for name, group in [(name, groups[name]) for name in order if groups[name]] + [("all", rows)]:
        means = [np.mean([row.get(part, 0.0) for row in group]) for part in columns]
        lines.append(f"| {name} | {len(group)} | {np.mean([r['length'] for r in group]):.0f} | "
                     f"{np.mean([r['depth'] for r in group]):.0f} | {np.mean([r['n_templates'] for r in group]):.1f} | "
                     + " | ".join(f"{value:.3f}" for value in means) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a3m-dir", required=True, help="folder of A3M files (searched recursively)")
    parser.add_argument("--hits-dir", help="folder of {stem}.hits.parquet (needs --templates)")
    parser.add_argument("--templates", help="template database directory (needs --hits-dir)")
    parser.add_argument("--every", type=int, default=1, help="every N-th A3M by name")
    parser.add_argument("--limit", type=int, default=None, help="at most this many A3Ms")
    parser.add_argument("--max-seqs", type=int, default=DEFAULT_MAX_SEQS)
    parser.add_argument("--max-stats-seqs", type=int, default=DEFAULT_MAX_STATS_SEQS)
    parser.add_argument("--max-templates", type=int, default=DEFAULT_MAX_TEMPLATES)
    parser.add_argument("--per-protein", action="store_true", help="also print one line per protein")
    args = parser.parse_args(argv)
    if (args.hits_dir is None) != (args.templates is None):
        parser.error("--hits-dir and --templates go together")
    a3ms = sorted(Path(args.a3m_dir).rglob("*.a3m"), key=lambda path: path.name)[::args.every][:args.limit]
    if not a3ms:
        parser.error(f"no .a3m files under {args.a3m_dir}")
    database = load_template_db(args.templates) if args.templates is not None else None
    clock = PartClock()
    clock.wrap(build_module, "read_a3m", "read")
    clock.wrap(build_module, "msa_features", "msa_all")
    clock.wrap(msa_module, "coevolution_features", "coevolution")
    clock.wrap(msa_module, "coupling_features", "couplings")
    clock.wrap(build_module, "read_hits", "templates")
    clock.wrap(build_module, "template_features", "templates")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for k, a3m in enumerate(a3ms):
            stem = a3m_stem(a3m)
            hits = Path(args.hits_dir) / f"{stem}.hits.parquet" if args.hits_dir is not None else None
            if hits is not None and not hits.exists():
                hits = None
            out = Path(scratch) / f"{stem}.npz"
            if k == 0:
                build_one(clock, a3m, out, hits, database, args)
            row = build_one(clock, a3m, out, hits, database, args)
            rows.append({"protein": stem, **row})
            if args.per_protein:
                print(f"{stem}\tL={row['length']}\tN={row['depth']}\tT={row['n_templates']}\t"
                      + "\t".join(f"{part}={row.get(part, 0.0):.3f}" for part in PARTS + ("total",)), flush=True)
    print(f"\nCPU seconds per protein (time.process_time), {len(rows)} A3Ms of {args.a3m_dir}"
          f"{', with template hits' if args.hits_dir else ', no templates'}; max_seqs {args.max_seqs}, "
          f"max_stats_seqs {args.max_stats_seqs}, max_templates {args.max_templates}\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
