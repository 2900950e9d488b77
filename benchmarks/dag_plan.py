"""Planning a proteome set: how long `snakemake -n` takes, and how much memory, as the job graph grows.

    python benchmarks/dag_plan.py --work SCRATCH/dag --proteins 100000 --per-chunk 500,250 [--shards 16] \\
        [--results benchmarks/RESULTS.md]

A synthetic proteome of ``--proteins`` sequences (seeded: random residues at UniProt's amino-acid frequencies,
lengths drawn from a log-normal with *E. coli*'s median and spread, 30 to 2,000 residues) is written to
``--work``; each chunk size gets a configuration with ``--shards`` database shards, 3 search iterations and a
template stage (the bundled example's template structures), and ``snakemake -n --quiet rules`` plans the whole
run under ``/usr/bin/time -v``. Planning reads the proteome and builds every job; nothing runs, and the database
FASTA is never read. The table reports jobs, wall and CPU seconds, and peak memory.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search_bench.report import publish  # noqa: E402

SECTION = "## Workflow planning: 100,000 proteins"
AMINO = "ACDEFGHIKLMNPQRSTVWY"
FREQUENCIES = np.array([8.25, 1.38, 5.46, 6.72, 3.86, 7.07, 2.27, 5.91, 5.80, 9.65, 2.41, 4.06, 4.74, 3.93,
                        5.53, 6.64, 5.36, 6.86, 1.10, 2.92])


def write_proteome(path: Path, proteins: int, seed: int = 0) -> None:
    if path.exists():
        return
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.round(rng.lognormal(np.log(274), 0.6, proteins)), 30, 2000).astype(int)
    letters = np.frombuffer(AMINO.encode(), dtype=np.uint8)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as handle:
        for i, length in enumerate(lengths):
            codes = rng.choice(letters, size=length, p=FREQUENCIES / FREQUENCIES.sum())
            handle.write(f">SYN{i:06d}\n{codes.tobytes().decode()}\n")
    tmp.rename(path)


def plan(work: Path, proteome: Path, per_chunk: int, shards: int) -> dict[str, float]:
    config = {
        "results": str(work / "results"),
        "proteomes": {"synthetic": str(proteome)},
        "databases": {"db": {"fasta": [str(ROOT / "example" / "db" / "sprot_firmicutes_slice.fasta.gz")],
                             "shards": shards}},
        "search": {"database": "db"},
        "chunks": {"proteins_per_chunk": per_chunk, "max_length": 5000},
        "templates": {"structures": [str(ROOT / "example" / "templates" / "structures" / "*.cif.gz")],
                      "search_msas": False},
    }
    path = work / f"config_{per_chunk}.yaml"
    path.write_text(yaml.safe_dump(config))
    command = ["/usr/bin/time", "-v", sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"),
               "-d", str(work), "-n", "--quiet", "rules", "--configfile", str(path), "--replace-workflow-config"]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    jobs = int(re.search(r"^total\s+(\d+)$", result.stdout, re.MULTILINE).group(1))

    def field(name: str) -> str:
        return re.search(rf"{re.escape(name)}: (.+)", result.stderr).group(1).strip()

    minutes, seconds = field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")[-2:]
    return {"per_chunk": per_chunk, "jobs": jobs, "wall": int(minutes) * 60 + float(seconds),
            "cpu": float(field("User time (seconds)")) + float(field("System time (seconds)")),
            "rss_mb": int(field("Maximum resident set size (kbytes)")) / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="scratch folder (proteome, configs)")
    parser.add_argument("--proteins", type=int, default=100_000)
    parser.add_argument("--per-chunk", default="500,250", help="proteins per chunk, comma-separated")
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--machine", default="AMD EPYC, 2 cores", help="named in the written section")
    parser.add_argument("--results", type=Path, help="write the table into this Markdown file")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    proteome = args.work / f"synthetic_{args.proteins}.fasta"
    write_proteome(proteome, args.proteins)
    rows = []
    for per_chunk in (int(v) for v in args.per_chunk.split(",")):
        measured = plan(args.work, proteome, per_chunk, args.shards)
        print(measured, flush=True)
        rows.append(f"| {measured['per_chunk']} | {-(-args.proteins // measured['per_chunk']):,} | "
                    f"{measured['jobs']:,} | {measured['wall']:.0f} | {measured['cpu']:.0f} | "
                    f"{1000 * measured['wall'] / measured['jobs']:.1f} | {measured['rss_mb']:.0f} |")
    command = (f"`python benchmarks/dag_plan.py --work SCRATCH --proteins {args.proteins} "
               f"--per-chunk {args.per_chunk} --shards {args.shards}`")
    body = "\n".join([
        f"{command}: `snakemake -n --quiet rules` on a synthetic proteome of {args.proteins:,} proteins (E. "
        f"coli-like lengths), {args.shards} database shards, 3 search iterations, the template stage on; the whole "
        f"plan, nothing run. Machine: {args.machine}.",
        "",
        "| proteins per chunk | chunks | jobs | wall s | CPU s | ms per job | peak RSS (MB) |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"- Jobs = chunks × (3 × ({args.shards} + 2) + 5) + 5: the search runs per chunk, shard and iteration, the "
        "template search, features and inference per chunk.",
    ])
    publish(body, args.results, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
