"""CPU of one `search_shard` job by the number of queries it holds: what `chunks.proteins_per_chunk` costs.

    python benchmarks/search_job_size.py --db RESULTS/db/NAME --queries PROTEOME.fasta \\
        [--sizes 50,200,800] [--shards 5,11] [--results-md benchmarks/RESULTS.md]

Takes the first N proteins of ``--queries`` for each size, builds their iteration-1 profiles (``trackfold
search-profiles``, the rule ``search_profiles``) and searches them against each of ``--shards`` of the database
(``trackfold search-shard --cpus 1``, the rule ``search_shard``) with the fast setting, one job after the other.
CPU seconds and peak memory are the ones each command logs about itself (``trackfold resources:``; exact, unlike
Snakemake's sampled benchmark files). A workflow run makes one such job per chunk, shard and iteration, so the
fixed part of a job (interpreter, imports, reading the shard and its k-mer index) is paid
``chunks x shards x iterations`` times.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search_bench.report import publish  # noqa: E402
from workflow_lib.report.collect import read_log_resources  # noqa: E402
from workflow_lib.seqio.fasta import read_fasta, write_fasta  # noqa: E402

SECTION = "## Homology search: queries per search job"
FAST = ["--iterations", "3", "--no-sensitive", "--pseudocounts", "substitution"]


def trackfold(arguments: list[str], log: Path) -> tuple[float, float]:
    """Run ``python -m workflow_lib ARGUMENTS``; (CPU seconds, peak RSS MB) from its resources line."""
    with open(log, "w") as handle:
        subprocess.run([sys.executable, "-m", "workflow_lib", *arguments], check=True, stdout=handle,
                       stderr=subprocess.STDOUT, cwd=ROOT)
    used = read_log_resources(log)
    if used is None:
        raise SystemExit(f"search_job_size: no resources line in {log}")
    return used["cpu_seconds"], used["max_rss_mb"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, required=True, help="a sharded sequence database (trackfold db build)")
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--sizes", default="50,200,800")
    parser.add_argument("--shards", default="5,11")
    parser.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / "search_job_size")
    parser.add_argument("--machine", default=platform.processor() or platform.machine())
    parser.add_argument("--results-md", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    shards = [int(n) for n in args.shards.split(",")]
    records = read_fasta(args.queries)
    if len(records) < max(sizes):
        raise SystemExit(f"search_job_size: {args.queries} holds {len(records)} proteins, fewer than {max(sizes)}")
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for size in sizes:
        fasta = args.work / f"q{size}.fasta"
        write_fasta(fasta, [(record.id, record.sequence) for record in records[:size]])
        residues = sum(len(record.sequence) for record in records[:size])
        profiles = args.work / f"q{size}.queries.npz"
        profile_cpu, _ = trackfold(["search-profiles", str(fasta), "--db", str(args.db), "--iteration", "1", *FAST,
                                    "--out", str(profiles)], args.work / f"profiles_{size}.log")
        for shard in shards:
            cpu, rss = trackfold(["search-shard", str(fasta), "--db", str(args.db), "--shard", f"{shard:03d}",
                                  "--iteration", "1", "--profiles", str(profiles), *FAST, "--cpus", "1",
                                  "--out", str(args.work / f"s{size}_{shard}.hits.parquet"),
                                  "--times", str(args.work / f"s{size}_{shard}.times.parquet")],
                                 args.work / f"shard_{size}_{shard}.log")
            rows.append({"size": size, "residues": residues, "shard": shard, "cpu": cpu, "rss": rss,
                         "profiles": profile_cpu})
            print(f"{size} queries ({residues:,} residues), shard {shard}: {cpu:.1f} CPU-s, {rss:.0f} MB", flush=True)

    lines = [
        f"`python benchmarks/search_job_size.py --db RESULTS/db/uniprot2014_sprot --queries CHUNKS.fasta --sizes "
        f"{args.sizes} --shards {args.shards}`, written {datetime.now():%Y-%m-%d %H:%M}: the first N proteins of "
        "consecutive workflow chunks of the *E. coli* proteome (200 proteins each), iteration 1 of the fast "
        f"setting, against single shards of UniProt-2014 + the Swiss-Prot subsets (16 shards of 10.6 M residues). "
        f"{args.machine}, shared with other jobs; CPU seconds and peak memory as each command logs them.",
        "",
        "| queries per job | residues | shard | CPU s | CPU s per query | peak RSS (MB) | profiles job, CPU s |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(f"| {row['size']} | {row['residues']:,} | {row['shard']} | {row['cpu']:.1f} | "
                     f"{row['cpu'] / row['size']:.3f} | {row['rss']:.0f} | {row['profiles']:.1f} |")
    small, large = (min(rows, key=lambda r: r["residues"]), max(rows, key=lambda r: r["residues"]))
    per_kres = 1000 * (large["cpu"] - small["cpu"]) / (large["residues"] - small["residues"])
    fixed = small["cpu"] - per_kres * small["residues"] / 1000
    lines += [
        "",
        f"- A job costs about {fixed:.1f} CPU-s plus {per_kres:.2f} per 1,000 query residues (a line through the "
        f"smallest and the largest job): with 16 shards and 3 iterations the fixed part is {48 * fixed:.0f} CPU-s "
        f"per chunk, {48 * fixed / 50:.1f} CPU-s per protein at 50 proteins per chunk (the default) and "
        f"{48 * fixed / 200:.1f} at 200, beside about {16 * per_kres * 0.3:.1f} CPU-s of iteration-1 search for a "
        "300-residue protein. Against a database of this size, use 200 or more proteins per chunk.",
    ]
    publish("\n".join(lines) + "\n", None if args.no_write else args.results_md, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
