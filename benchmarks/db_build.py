"""Database build at scale: wall time and peak memory of ``trackfold db build`` on a FASTA and on a copy N times
its size (shuffled copies), with the same residues per shard, so that a build whose memory is bounded by the
shard shows the same peak on both.

    python benchmarks/db_build.py --fasta SCRATCH/uniprot2014/uniprot2014.fasta.gz --copies 10 \\
        --shards 16 --work SCRATCH/db_build [--results benchmarks/RESULTS.md]

The N-times FASTA holds the original records and N - 1 copies of each, ``{id}_copy{c}``, whose residues are
shuffled (seeded: the same file every time), so no copy is a duplicate and the database really grows N times.
Each build runs under ``/usr/bin/time -v`` (peak resident memory of the whole process) with ``shards`` and
``N × shards`` shards. Both the FASTA and the databases stay in ``--work`` (a scratch directory, never git).
"""

from __future__ import annotations

import argparse
import gzip
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search_bench.report import write_section  # noqa: E402
from workflow_lib.seqio.fasta import iter_fasta  # noqa: E402

SECTION = "## Database build: memory at any size"


def write_copies(source: Path, out: Path, copies: int, seed: int = 0) -> None:
    """``source`` plus ``copies - 1`` shuffled copies of every record, as gzipped FASTA (skipped when present)."""
    if out.exists():
        return
    rng = np.random.default_rng(seed)
    tmp = out.with_name(f".{out.name}.tmp")
    with gzip.open(tmp, "wt", compresslevel=1) as handle:
        for copy in range(copies):
            for record in iter_fasta(source, allow_duplicates=True, safe_ids=False, check_nucleotide=False):
                sequence = record.sequence
                name = record.id
                if copy:
                    letters = np.frombuffer(sequence.encode(), dtype=np.uint8).copy()
                    rng.shuffle(letters)
                    sequence = letters.tobytes().decode()
                    name = f"{record.id}_copy{copy}"
                handle.write(f">{name}\n{sequence}\n")
    tmp.replace(out)


def timed_build(fasta: Path, out: Path, shards: int) -> dict:
    """``trackfold db build`` under ``/usr/bin/time -v``: wall seconds, peak RSS (MB), sequences, residues."""
    command = ["/usr/bin/time", "-v", sys.executable, "-m", "workflow_lib", "db", "build", "--force",
               "--out", str(out), "--shards", str(shards), str(fasta)]
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=True)
    wall = time.perf_counter() - start
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr).group(1))
    built = re.search(r"(\d+) sequences, (\d+) residues", result.stdout)
    return {"fasta": fasta.name, "shards": shards, "sequences": int(built.group(1)), "residues": int(built.group(2)),
            "wall_s": wall, "peak_mb": peak_kb / 1024}


def table(rows: list[dict], command: str) -> str:
    lines = [f"`{command}`", "", "| input | sequences | residues | shards | residues per shard | wall s | peak RSS MB |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['fasta']} | {row['sequences']:,} | {row['residues']:,} | {row['shards']} | "
                     f"{row['residues'] // row['shards']:,} | {row['wall_s']:.0f} | {row['peak_mb']:,.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fasta", required=True, type=Path)
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    bigger = args.work / f"{args.fasta.name.split('.')[0]}_x{args.copies}.fasta.gz"
    write_copies(args.fasta, bigger, args.copies)
    rows = [timed_build(args.fasta, args.work / "db_x1", args.shards),
            timed_build(bigger, args.work / f"db_x{args.copies}", args.shards * args.copies)]
    command = (f"python benchmarks/db_build.py --fasta {args.fasta.name} --copies {args.copies} "
               f"--shards {args.shards} --work SCRATCH")
    text = table(rows, command)
    print(text)
    if args.results:
        write_section(args.results, SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
