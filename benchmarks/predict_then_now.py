"""Inference CPU on the same proteome proteins: the six-block network on every crop against today's default.

    python benchmarks/predict_then_now.py --features-dir RESULTS/PROTEOME/features --work SCRATCH [--every 15]
        [--threads 1] [--bfloat16]

Takes the feature files (``*.npz``, as the workflow writes them) of a proteome run, sorts them by length and keeps
every ``--every``-th (a fixed sample spanning the lengths), then runs ``trackfold predict`` on them twice, one
setting after the other, in one run on ``--threads`` torch threads with ``--pair-heads none`` (what a proteome run
keeps):

* ``then``: ``--model models/trackfold_small_v4.pt --crop-pairs all``: the six-block checkpoint that was the
  default when CPU inference cost about 15.6 CPU-s per *E. coli* protein, on every pair of half-window segments;
* ``now``: ``trackfold predict``'s defaults (the two-block ``trackfold_lite_v2`` on the crops that matter,
  ``--crop-pairs contacts``);
* ``now, bfloat16`` (with ``--bfloat16``): the same with ``--precision bfloat16``, the setting for CPUs with
  AVX512-BF16 or AMX (mixed precision where the CPU has it).

Both fold from the distogram with today's fold (compiled energy, 200 steps per start), so the ``then`` row
understates what inference cost then. CPU seconds per protein come from each run's ``--stats`` table (one torch
thread: wall ≈ CPU) and the whole command's CPU from the child's resource usage. Prints a table per length bin
(proteins, mean length, seconds per protein each way, ratio, mean pLDDT each way) for benchmarks/RESULTS.md.
Accuracy is not measured here (these proteins have no known structure): the checkpoints' accuracy on held-out
chains is in benchmarks/RESULTS.md ("The test split").
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
PY = [sys.executable, "-m", "workflow_lib"]
SETTINGS = {
    "then": ["--model", str(ROOT / "models" / "trackfold_small_v4.pt"), "--crop-pairs", "all"],
    "now": [],
    "bf16": ["--precision", "bfloat16"],
}
BINS = [(0, 128), (129, 256), (257, 384), (385, 768), (769, 100_000)]


def sample(features_dir: Path, every: int) -> list[tuple[int, Path]]:
    """(length, path) of every ``every``-th feature file by length."""
    files = []
    for path in sorted(features_dir.glob("*.npz")):
        with np.load(path) as arrays:
            files.append((int(arrays["msa"].shape[-1]), path))
    files.sort()
    return files[every // 2::every]


def run(label: str, paths: list[Path], work: Path, threads: int) -> tuple[pd.DataFrame, float]:
    """``trackfold predict`` with ``label``'s settings: its stats table and the command's CPU seconds."""
    out = work / label
    stats = work / f"{label}.stats.parquet"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([*PY, "predict", "--out-dir", str(out), "--pair-heads", "none", "--threads", str(threads),
                    "--no-resume", "--stats", str(stats), *SETTINGS[label], *map(str, paths)], check=True,
                   stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return pd.read_parquet(stats), (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--features-dir", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--every", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bfloat16", action="store_true", help="also today's defaults with --precision bfloat16")
    args = parser.parse_args(argv)
    chosen = sample(args.features_dir, args.every)
    args.work.mkdir(parents=True, exist_ok=True)
    tables, cpu = {}, {}
    labels = [label for label in SETTINGS if label != "bf16" or args.bfloat16]
    for label in labels:
        tables[label], cpu[label] = run(label, [path for _, path in chosen], args.work, args.threads)
        print(f"{label}: {cpu[label]:.1f} CPU-s for {len(chosen)} proteins", file=sys.stderr)
    both = tables["then"].merge(tables["now"], on="protein", suffixes=("_then", "_now"))
    bf16 = "bf16" in tables
    if bf16:
        both = both.merge(tables["bf16"].add_suffix("_bf16").rename(columns={"protein_bf16": "protein"}),
                          on="protein")
    whole = f"then {cpu['then']:.0f} CPU-s, now {cpu['now']:.0f} CPU-s ({cpu['then'] / cpu['now']:.2f}x)"
    if bf16:
        whole += f", now in bfloat16 {cpu['bf16']:.0f} CPU-s ({cpu['then'] / cpu['bf16']:.2f}x)"
    print(f"{len(chosen)} proteins, {sum(n for n, _ in chosen):,} residues; whole commands: {whole}\n")
    extra_head = " now, bfloat16: s per protein | then / now, bfloat16 |" if bf16 else ""
    print("| residues | proteins | mean length | then: s per protein | now: s per protein | then / now |"
          + extra_head + " mean pLDDT then / now" + (" / now, bfloat16 |" if bf16 else " |"))
    print("|---|---|---|---|---|---|" + ("---|---|" if bf16 else "") + "---|")
    rows = [(f"{lo}-{hi}" if hi < 100_000 else f"> {lo - 1}", both[(both.length_now >= lo) & (both.length_now <= hi)])
            for lo, hi in BINS] + [("all", both)]
    for name, part in rows:
        if part.empty:
            continue
        then, now = part.seconds_then.mean(), part.seconds_now.mean()
        line = f"| {name} | {len(part)} | {part.length_now.mean():.0f} | {then:.2f} | {now:.2f} | {then / now:.2f}x |"
        plddt = f" {part.mean_plddt_then.mean():.1f} / {part.mean_plddt_now.mean():.1f}"
        if bf16:
            half = part.seconds_bf16.mean()
            line += f" {half:.2f} | {then / half:.2f}x |"
            plddt += f" / {part.mean_plddt_bf16.mean():.1f}"
        print(line + plddt + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
