"""Profile database against sequence database at Swiss-Prot scale: cost per query and MSA depth, side by side.

A fixed sample of *E. coli* K-12 proteins (``--proteins``, chosen by SHA-1 of their IDs) searched against one
database in three forms, each on 1 CPU under ``nice -n 10``, in one run:

- ``trackfold msa`` against the sequence database (``trackfold db build``) with the fast setting
  (``--no-sensitive --pseudocounts substitution``, 3 iterations) and, with ``--default``, the default setting;
- ``trackfold msa`` against its profile database (``trackfold db cluster``) with the same setting,
  ``--iterations N`` (default 2);
- ``jackhmmer -N 3`` against the database's FASTA (``--fasta``, uncompressed; left out without it).

Per tool: CPU seconds per query (the whole run / queries), the MSA's depth (rows) and Neff (trackfold's
``msa_stats``; jackhmmer: targets with E ≤ 1e-3 in its last round, its inclusion threshold). The profile database's
build (clustering) is reported from its manifest. Writes the section "## Homology search: profile database at
Swiss-Prot scale" of benchmarks/RESULTS.md (``--no-write`` to print only)::

    .venv/bin/python benchmarks/profile_db_cost.py --db SEQ_DB --profiles PROFILE_DB --fasta DB.fasta --proteins 20

Seed: "Iterative MSA Alignment" — this script measures it, it implements nothing of it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from search import machine  # noqa: E402
from search_bench import report, tools  # noqa: E402
from search_bench.datasets import stable_subsample  # noqa: E402
from workflow_lib.seqio.atomic import write_text_atomic  # noqa: E402
from workflow_lib.seqio.fasta import read_fasta, write_fasta  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
PROTEOME = SHARED / "proteome_ecoli_k12" / "UP000000625_83333.fasta.gz"
WORK = ROOT / "benchmarks" / "_work" / "profile_db_cost"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## Homology search: profile database at Swiss-Prot scale"
PY = [str(ROOT / ".venv" / "bin" / "python"), "-m", "workflow_lib"]


def trackfold_msa(name: str, db: Path, queries: Path, options: list[str]) -> dict:
    out = WORK / name
    measured = tools.run_measured(PY + ["msa", "--db", str(db), "--out-dir", str(out), "--cpus", "1", *options,
                                        str(queries)], cwd=ROOT)
    stats = pd.read_parquet(out / "msa_stats.parquet")
    return {"tool": name, "cpu_s": measured.cpu_s, "wall_s": measured.wall_s, "peak_rss_kib": measured.peak_rss_kib,
            "depth": stats["depth"].tolist(), "neff": stats["neff"].tolist(), "command": measured.commands[0]}


def jackhmmer(fasta: Path, queries: Path) -> dict:
    out = WORK / "jackhmmer"
    out.mkdir(parents=True, exist_ok=True)
    measured = tools.run_measured(["jackhmmer", "-N", "3", "--cpu", "1", "--noali", "-o", "/dev/null",
                                   "--tblout", str(out / "hits.tbl"), str(queries), str(fasta)])
    hits = tools.read_hmmer_tblout(out / "hits.tbl")
    names = [record.id for record in read_fasta(queries)]
    depth = [1 + int(((hits["query"] == q) & (hits["evalue"] <= 1e-3) & (hits["target"] != q)).sum()) for q in names]
    return {"tool": "jackhmmer", "cpu_s": measured.cpu_s, "wall_s": measured.wall_s,
            "peak_rss_kib": measured.peak_rss_kib, "depth": depth, "neff": [], "command": measured.commands[0]}


def markdown(results: dict) -> str:
    n = results["proteins"]
    rows = results["tools"]
    jack = next((r for r in rows if r["tool"] == "jackhmmer"), None)
    build = results["profile_build"]
    parts = [
        f"Written by `benchmarks/profile_db_cost.py` on {results['finished']}. Machine: {results['machine']}; shared "
        "with other jobs: compare CPU seconds within one run. Every tool on 1 CPU under `nice -n 10`.",
        "",
        f"{n} *E. coli* K-12 proteins (fixed sample, {results['residues']:,} residues) against "
        f"{results['database']} ({build['sequences']:,} sequences) as a sequence database and as its profile "
        f"database ({build['clusters']:,} clusters at {build['identity']:.0%} identity over {build['coverage']:.0%} "
        f"coverage; clustered in {build['seconds']:,.0f} s of wall time).",
        "",
        "| tool | CPU s / query | × jackhmmer | MSA depth median / mean | Neff mean | peak RSS MiB |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        cpu = row["cpu_s"] / n
        ratio = f"{row['cpu_s'] / jack['cpu_s']:.2f}" if jack else "–"
        depth = pd.Series(row["depth"])
        neff = f"{pd.Series(row['neff']).mean():.1f}" if row["neff"] else "–"
        parts.append(f"| {row['label']} | {cpu:.2f} | {ratio} | {depth.median():.0f} / {depth.mean():.0f} | {neff} | "
                     f"{row['peak_rss_kib'] / 1024:.0f} |")
    parts += ["", "jackhmmer's depth: targets with E ≤ 1e-3 in its last round, plus the query; trackfold's: rows of "
              "the output MSA (redundancy filter at 90% identity, coverage ≥ 50%).", "", "Commands:", ""]
    parts += [f"- `{shorten(row['command'], results.get('paths', {}))}`" for row in rows]
    return "\n".join(parts)


def shorten(command: str, paths: dict[str, str]) -> str:
    """The command with the databases' paths as ``SEQ_DB``, ``PROFILE_DB``, ``DB.fasta`` and the repository root
    left out."""
    for name, path in paths.items():
        command = command.replace(path, name)
    return command.replace(str(ROOT) + "/", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, type=Path, help="sequence database (trackfold db build)")
    parser.add_argument("--profiles", required=True, type=Path, help="its profile database (trackfold db cluster)")
    parser.add_argument("--fasta", type=Path, help="the database's FASTA, uncompressed, for jackhmmer")
    parser.add_argument("--proteins", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=2, help="profile-database search iterations")
    parser.add_argument("--default", action="store_true", help="also the default setting (the slowest)")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--report-only", action="store_true", help="rewrite the section from the last run's results")
    args = parser.parse_args(argv)
    if args.report_only:
        return publish(json.loads((WORK / "results.json").read_text()), args.no_write)
    records = read_fasta(PROTEOME)
    chosen = set(stable_subsample([r.id for r in records], args.proteins, salt="ecoli"))
    sample = [r for r in records if r.id in chosen]
    WORK.mkdir(parents=True, exist_ok=True)
    queries = WORK / "queries.fasta"
    write_fasta(queries, [(r.id, r.sequence) for r in sample], width=0)
    runs = [("trackfold_fast", "trackfold msa, fast setting (sequence database)",
             lambda: trackfold_msa("trackfold_fast", args.db, queries,
                                   ["--no-sensitive", "--pseudocounts", "substitution"])),
            ("trackfold_profiles", f"trackfold msa, fast setting, --iterations {args.iterations} (profile database)",
             lambda: trackfold_msa("trackfold_profiles", args.profiles, queries,
                                   ["--iterations", str(args.iterations), "--no-sensitive", "--pseudocounts",
                                    "substitution"]))]
    if args.default:
        runs.append(("trackfold", "trackfold msa, default (sequence database)",
                     lambda: trackfold_msa("trackfold", args.db, queries, [])))
    if args.fasta:
        runs.append(("jackhmmer", "jackhmmer -N 3", lambda: jackhmmer(args.fasta, queries)))
    rows = []
    for name, label, run in runs:
        print(f"[profile-db-cost] {name}", file=sys.stderr, flush=True)
        row = run()
        row["label"] = label
        rows.append(row)
        print(f"[profile-db-cost] {name}: {row['cpu_s'] / len(sample):.2f} CPU-s/query", file=sys.stderr, flush=True)
    manifest = json.loads((args.profiles / "manifest.json").read_text())
    build = {"sequences": manifest["sequences"], "clusters": manifest["clusters"],
             "identity": manifest["settings"]["identity"], "coverage": manifest["settings"]["coverage"],
             "seconds": manifest["build"]["seconds"]}
    paths = {"SEQ_DB": str(args.db), "PROFILE_DB": str(args.profiles)}
    if args.fasta:
        paths["DB.fasta"] = str(args.fasta)
    results = {"finished": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(), "proteins": len(sample),
               "residues": sum(len(r.sequence) for r in sample), "database": args.db.name, "profile_build": build,
               "tools": rows, "paths": paths}
    write_text_atomic(WORK / "results.json", json.dumps(results, indent=1))
    return publish(results, args.no_write)


def publish(results: dict, no_write: bool) -> int:
    text = markdown(results)
    print(text)
    if not no_write:
        existing = RESULTS.read_text() if RESULTS.exists() else "# Benchmarks\n"
        write_text_atomic(RESULTS, report.replace_section(existing, SECTION, text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
