"""*E. coli* proteins against a Swiss-Prot-sized database: CPU per query, MSA depth and Neff, every tool in one run.

A fixed sample of *E. coli* K-12 proteins (``--proteins``, default 200, chosen by SHA-1 of their IDs) searched
against one database by each tool on 1 CPU under ``nice -n 10`` (``--parallel 2`` runs two tools at a time, one
core each):

- ``trackfold`` / ``trackfold_fast``: ``trackfold msa`` against the sequence database (``trackfold db build``)
  with the default setting and with the fast setting (``--no-sensitive --pseudocounts substitution``),
  3 iterations; ``trackfold_fast2``: the fast setting with 2 iterations; ``trackfold_one_hit`` /
  ``trackfold_fast_one_hit``: the same with ``--two-hit never`` (one seed makes a diagonal, as before the
  two-hit rule);
- ``profiles``: ``trackfold msa`` against its profile database (``--profiles``, ``trackfold db cluster``) with the
  fast setting and ``--profile-iterations`` (default 2);
- ``jackhmmer``: ``jackhmmer -N 3`` per query against the database's FASTA (``--fasta``, uncompressed), its final
  round's included hits saved with ``-A``;
- ``mmseqs``: ``mmseqs search --num-iterations 3 -s 7.5 -e 1e-3`` against the same FASTA (``mmseqs createdb``
  once, not timed, as trackfold's database build is not), then ``result2msa``.

Depth and Neff are computed the same way for every tool (``workflow_lib.search.iterative.msa_statistics``, the
HH-suite Neff) on each MSA after trackfold's output filter (90% identity, 50% query coverage), so the rows
compare; each peer's unfiltered depth is reported too. trackfold's MSAs are written filtered. The CPU per query is
the whole run's (search and MSA writing) divided by the queries. Runs are cached per tool (the command and the
sample in the key; ``--force TOOL`` reruns one). Writes the section "## Homology search: E. coli against
UniProt-2014 (cost, depth, Neff)" of benchmarks/RESULTS.md (``--no-write`` to print only)::

    .venv/bin/python benchmarks/uniprot_cost.py --db SEQ_DB --fasta DB.fasta [--profiles PROFILE_DB] \\
        [--proteins 200] [--tools trackfold,trackfold_fast,jackhmmer,mmseqs] [--parallel 2]

HHblits-style iterative search (Remmert et al. 2012, Nat. Methods 9:173) — this script measures it, it implements
nothing of it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from search import machine  # noqa: E402
from search_bench import report, tools  # noqa: E402
from search_bench.datasets import stable_subsample  # noqa: E402
from workflow_lib.search.iterative import filter_alignment, msa_statistics  # noqa: E402
from workflow_lib.seqio.atomic import write_text_atomic  # noqa: E402
from workflow_lib.seqio.fasta import read_fasta, safe_name, write_fasta  # noqa: E402
from workflow_lib.seqio.msa import Alignment, read_a3m, read_stockholm  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
PROTEOME = SHARED / "proteome_ecoli_k12" / "UP000000625_83333.fasta.gz"
WORK = ROOT / "benchmarks" / "_work" / "uniprot_cost"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## Homology search: E. coli against UniProt-2014 (cost, depth, Neff)"
PY = [str(ROOT / ".venv" / "bin" / "python"), "-m", "workflow_lib"]
FAST = ["--no-sensitive", "--pseudocounts", "substitution"]
TOOLS = ("trackfold", "trackfold_one_hit", "trackfold_fast", "trackfold_fast_one_hit", "trackfold_fast2", "profiles",
         "jackhmmer", "mmseqs")
ONE_HIT = ["--two-hit", "never"]
LABELS = {"trackfold": "trackfold msa, default", "trackfold_fast": "trackfold msa, fast setting",
          "trackfold_one_hit": "trackfold msa, default, one seed per diagonal",
          "trackfold_fast_one_hit": "trackfold msa, fast setting, one seed per diagonal",
          "trackfold_fast2": "trackfold msa, fast setting, 2 iterations",
          "profiles": "trackfold msa, fast setting, profile database", "jackhmmer": "jackhmmer -N 3",
          "mmseqs": "mmseqs search --num-iterations 3 -s 7.5"}


def ecoli_sample(proteins: int, work: Path) -> tuple[list, Path]:
    """The fixed sample of ``proteins`` *E. coli* proteins (by SHA-1 of their IDs) and its FASTA in ``work``."""
    records = read_fasta(PROTEOME)
    chosen = set(stable_subsample([r.id for r in records], proteins, salt="ecoli"))
    sample = [r for r in records if r.id in chosen]
    work.mkdir(parents=True, exist_ok=True)
    queries = work / f"queries_{len(sample)}.fasta"
    write_fasta(queries, [(r.id, r.sequence) for r in sample], width=0)
    return sample, queries


def msa_stats(alignment) -> dict:
    """Depth and Neff as written and after trackfold's output filter (id 90%, coverage 50%)."""
    raw = msa_statistics(alignment)
    kept = msa_statistics(filter_alignment(alignment, max_identity=0.9, min_coverage=0.5))
    return {"depth_raw": int(raw["depth"]), "depth": int(kept["depth"]), "neff": float(kept["neff"])}


def query_first(alignment: Alignment, name: str, sequence: str) -> Alignment:
    """A peer's MSA with the query as row 0, as the filter expects: its own row moved first (jackhmmer saves the
    self hit ``NAME/START-END`` among the others), else the query prepended when the match columns are its
    residues, else unchanged."""
    own = [i for i, row_name in enumerate(alignment.names) if row_name.split("/")[0] == name
           and alignment.rows[i].replace("-", "").upper() == sequence]
    if own:
        return alignment.subset([own[0]] + [i for i in range(alignment.depth) if i != own[0]])
    if alignment.length == len(sequence):
        return Alignment.from_a3m_rows([name, *alignment.names], ["", *alignment.descriptions],
                                       [sequence, *alignment.rows])
    return alignment


def trackfold_msa(out: Path, db: Path, queries: Path, names: list[str], options: list[str]) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    measured = tools.run_measured(PY + ["msa", "--db", str(db), "--out-dir", str(out), "--cpus", "1", *options,
                                        str(queries)], cwd=ROOT)
    files = pd.read_parquet(out / "msa_stats.parquet").set_index("protein")["safe_id"]
    per_query = [msa_stats(read_a3m(out / f"{files[name]}.a3m")) for name in names]
    return measured_row(measured, per_query)


def jackhmmer(out: Path, fasta: Path, queries: Path, names: list[str]) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    total, per_query = tools.Measured(), []
    for record in read_fasta(queries):
        one = out / f"{safe_name(record.id)}.fasta"
        write_fasta(one, [(record.id, record.sequence)], width=0)
        sto = out / f"{safe_name(record.id)}.sto"
        total.add(tools.run_measured(["jackhmmer", "-N", "3", "--cpu", "1", "--noali", "-o", "/dev/null",
                                      "-A", str(sto), str(one), str(fasta)], record=not total.commands))
    for record in read_fasta(queries):
        sto = out / f"{safe_name(record.id)}.sto"
        # no -A file: nothing was included in the final round (the MSA is the query alone)
        per_query.append(msa_stats(query_first(read_stockholm(sto), record.id, record.sequence))
                         if sto.exists() and sto.stat().st_size else {"depth_raw": 1, "depth": 1, "neff": 1.0})
    total.commands = ["jackhmmer -N 3 --cpu 1 --noali -o /dev/null -A QUERY.sto QUERY.fasta DB.fasta "
                      "(one call per query)"]
    return measured_row(total, per_query)


def mmseqs(out: Path, fasta: Path, queries: Path, names: list[str]) -> dict:
    stat = fasta.stat()
    target = WORK / f"mmseqs_db_{tools.digest(str(fasta.resolve()), str(stat.st_size), str(stat.st_mtime_ns))}" / "db"
    if not (target.parent / "done").exists():
        shutil.rmtree(target.parent, ignore_errors=True)
        target.parent.mkdir(parents=True)
        tools.run_measured(["mmseqs", "createdb", str(fasta), str(target)], record=False)
        (target.parent / "done").write_text("")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    qdb, res, msa, tmp = out / "q", out / "res", out / "msa", out / "tmp"
    tools.run_measured(["mmseqs", "createdb", str(queries), str(qdb)], record=False)
    total = tools.run_measured(["mmseqs", "search", str(qdb), str(target), str(res), str(tmp), "--num-iterations",
                                "3", "-s", "7.5", "-e", "1e-3", "--threads", "1"])
    total.add(tools.run_measured(["mmseqs", "result2msa", str(qdb), str(target), str(res), str(msa),
                                  "--msa-format-mode", "5", "--threads", "1"]))
    unpacked = out / "a3m"
    tools.run_measured(["mmseqs", "unpackdb", str(msa), str(unpacked), "--unpack-name-mode", "0"], record=False)
    # q.lookup names a query by its accession; createdb numbers the queries in file order from 0
    keys = [line.split("\t")[0] for line in (out / "q.lookup").read_text().splitlines()]
    lookup = {record.id: unpacked / key for record, key in zip(read_fasta(queries), keys)}
    per_query = []
    for name in names:
        path = lookup.get(name)
        per_query.append(msa_stats(read_a3m(path)) if path is not None and path.exists() and path.stat().st_size
                         else {"depth_raw": 1, "depth": 1, "neff": 1.0})
    return measured_row(total, per_query)


def measured_row(measured: tools.Measured, per_query: list[dict]) -> dict:
    return {"cpu_s": measured.cpu_s, "wall_s": measured.wall_s, "peak_rss_kib": measured.peak_rss_kib,
            "command": measured.commands[0] if measured.commands else "",
            "depth": [q["depth"] for q in per_query], "depth_raw": [q["depth_raw"] for q in per_query],
            "neff": [q["neff"] for q in per_query]}


def markdown(results: dict) -> str:
    n = results["proteins"]
    rows = results["tools"]
    jack = next((r for r in rows if r["tool"] == "jackhmmer"), None)
    parts = [
        f"Written by `benchmarks/uniprot_cost.py` on {results['finished']}. Machine: {results['machine']}; every tool "
        f"on 1 CPU under `nice -n 10`, {results['parallel']} at a time: compare CPU seconds within one run.",
        "",
        f"{n} *E. coli* K-12 proteins (fixed sample, {results['residues']:,} residues) against "
        f"{results['database']} ({results['sequences']:,} sequences, {results['db_residues'] / 1e6:.0f} M residues). "
        "Depth and Neff of every tool's MSA after trackfold's output filter (90% identity, 50% coverage), computed "
        "by the same function; *unfiltered* is the peer's MSA as written.",
        "",
        "| tool | CPU s / query | × jackhmmer | depth median / mean | Neff mean | depth unfiltered median | "
        "queries with depth 1 | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cpu = row["cpu_s"] / n
        ratio = f"{row['cpu_s'] / jack['cpu_s']:.2f}" if jack else "–"
        depth = np.array(row["depth"])
        parts.append(f"| {LABELS[row['tool']]} | {cpu:.2f} | {ratio} | {np.median(depth):.0f} / {depth.mean():.0f} | "
                     f"{np.mean(row['neff']):.2f} | {np.median(row['depth_raw']):.0f} | "
                     f"{int((depth <= 1).sum())} | {row['peak_rss_kib'] / 1024:.0f} |")
    parts += ["", "Commands:", ""]
    parts += [f"- `{shorten(row['command'], results.get('paths', {}))}`" for row in rows]
    return "\n".join(parts)


def shorten(command: str, paths: dict[str, str]) -> str:
    """The command with the databases' paths as ``SEQ_DB``, ``PROFILE_DB``, ``DB.fasta`` and the work and
    repository paths left out."""
    for name, path in paths.items():
        command = command.replace(path, name)
    return command.replace(str(WORK) + "/", "").replace(str(ROOT) + "/", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, type=Path, help="sequence database (trackfold db build)")
    parser.add_argument("--fasta", required=True, type=Path, help="the database's FASTA, uncompressed (peers)")
    parser.add_argument("--profiles", type=Path, help="its profile database (trackfold db cluster)")
    parser.add_argument("--proteins", type=int, default=200)
    parser.add_argument("--profile-iterations", type=int, default=2)
    parser.add_argument("--tools", default="trackfold,trackfold_fast,jackhmmer,mmseqs",
                        type=lambda s: s.split(","), help=f"of {','.join(TOOLS)}")
    parser.add_argument("--force", default=[], type=lambda s: s.split(","), help="rerun these tools")
    parser.add_argument("--parallel", type=int, default=1, help="tools run at a time (one core each)")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--report-only", action="store_true", help="rewrite the section from the last run's results")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.tools) - set(TOOLS))
    if unknown:
        parser.error(f"unknown tools {', '.join(unknown)}; choose from {', '.join(TOOLS)}")
    if "profiles" in args.tools and args.profiles is None:
        parser.error("--tools profiles needs --profiles")
    if args.report_only:
        return publish(json.loads((WORK / "results.json").read_text()), args.no_write)
    sample, queries = ecoli_sample(args.proteins, WORK)
    names = [r.id for r in sample]
    runs = {
        "trackfold": lambda out: trackfold_msa(out, args.db, queries, names, []),
        "trackfold_fast": lambda out: trackfold_msa(out, args.db, queries, names, FAST),
        "trackfold_one_hit": lambda out: trackfold_msa(out, args.db, queries, names, ONE_HIT),
        "trackfold_fast_one_hit": lambda out: trackfold_msa(out, args.db, queries, names, FAST + ONE_HIT),
        "trackfold_fast2": lambda out: trackfold_msa(out, args.db, queries, names, FAST + ["--iterations", "2"]),
        "profiles": lambda out: trackfold_msa(out, args.profiles, queries, names,
                                              ["--iterations", str(args.profile_iterations), *FAST]),
        "jackhmmer": lambda out: jackhmmer(out, args.fasta, queries, names),
        "mmseqs": lambda out: mmseqs(out, args.fasta, queries, names),
    }

    def run(tool: str) -> dict:
        # the profile database is part of the profiles run's key only
        key = tools.digest(queries, str(args.db), str(args.fasta),
                           str(args.profiles) if tool == "profiles" else "None", tool, str(args.profile_iterations))
        cached = WORK / f"{tool}.json"
        if tool not in args.force and cached.exists():
            row = json.loads(cached.read_text())
            if row.get("key") == key:
                print(f"[uniprot-cost] {tool}: cached", file=sys.stderr, flush=True)
                return row
        print(f"[uniprot-cost] {tool}: running", file=sys.stderr, flush=True)
        row = runs[tool](WORK / tool)
        row.update(tool=tool, key=key, finished=time.strftime("%Y-%m-%d %H:%M"))
        write_text_atomic(cached, json.dumps(row, indent=1))
        print(f"[uniprot-cost] {tool}: {row['cpu_s'] / len(sample):.2f} CPU-s/query", file=sys.stderr, flush=True)
        return row

    ordered = [tool for tool in TOOLS if tool in args.tools]
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        rows = list(pool.map(run, ordered))
    manifest = json.loads((args.db / "manifest.json").read_text())
    paths = {"SEQ_DB": str(args.db), "DB.fasta": str(args.fasta)}
    if args.profiles:
        paths["PROFILE_DB"] = str(args.profiles)
    results = {"finished": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(), "proteins": len(sample),
               "residues": sum(len(r.sequence) for r in sample), "database": args.db.name,
               "sequences": int(manifest["total_sequences"]), "db_residues": int(manifest["total_residues"]),
               "parallel": max(1, args.parallel), "tools": rows, "paths": paths}
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
