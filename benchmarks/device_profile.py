"""Where a whole search's time goes on one device: cProfile of the parent process of ``build_msas`` for the first
``--queries`` *E. coli* proteins against the Swiss-Prot subsets of the proteome-scale benchmark (the
"Homology search on a GPU" sections of benchmarks/RESULTS.md). With ``--device cuda`` the GPU's time shows up as
the parent's wait in the first read-back after a kernel launch (``Tensor.cpu()``); the workers' prefilter as
time receiving their results.

    python benchmarks/device_profile.py --shared ../shared/data --out OUT [--queries 80] [--device cuda]

Writes ``OUT/profile_{device}.txt`` (top functions by own and by cumulative time) and prints its head.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from device_search import PROTEOME_DATABASE  # noqa: E402
from workflow_lib.db.build import build_database  # noqa: E402
from workflow_lib.search.iterative import build_msas  # noqa: E402
from workflow_lib.search.settings import FAST  # noqa: E402
from workflow_lib.seqio.fasta import read_fasta  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=None, help="the database goes here (default OUT/work)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--queries", type=int, default=80)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args(argv)
    work = args.work or args.out / "work"
    work.mkdir(parents=True, exist_ok=True)
    db = work / "sprot_db"
    if not (db / "manifest.json").exists():
        build_database([args.shared / "swissprot_subsets_prokka" / f"{n}.fasta.gz" for n in PROTEOME_DATABASE],
                       db, shards=1)
    records = read_fasta(args.shared / "proteome_ecoli_k12" / "UP000000625_83333.fasta.gz")[:args.queries]
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    settings = FAST.replace(iterations=args.iterations)
    build_msas(records, db, settings.search, settings.msa, cpus=args.cpus, device=args.device)
    profile.disable()
    text = io.StringIO()
    text.write(f"{args.device}: {len(records)} queries, {args.iterations} iterations, --cpus {args.cpus}, "
               f"{time.perf_counter() - started:.2f} s wall\n")
    stats = pstats.Stats(profile, stream=text)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(45)
    (args.out / f"profile_{args.device}.txt").write_text(text.getvalue())
    print(text.getvalue()[:6000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
