"""Remote homologs side by side: SCOP superfamilies on UniProt (MMseqs2's sensitivity benchmark).

One command fills every row (each tool's run is cached under benchmarks/_work/remote/, so only what changed
runs)::

    .venv/bin/python benchmarks/remote_homology.py                          # all tools, writes RESULTS.md section
    .venv/bin/python benchmarks/remote_homology.py --tools trackfold_profiles   # rerun one tool, peers read back

Set (:func:`search_bench.datasets.load_scop`): the 6,370 UniProt sequences of
``shared/data/scop_uniprot_mmseqs2`` cut to their SCOP 1.75 domains (7,598 domains; a multi-domain sequence
gives one entry per domain) form the database; the queries are a deterministic subsample (``--queries``,
default 600) of the 6,562 domains with a superfamily partner. Every tool searches the same queries against the
same database on 1 CPU under ``nice -n 10``. Per query, ROC1 (the fraction of true targets ranked, by E-value,
before the first false one) at three levels: true = same family / superfamily / fold, false = another fold,
same-fold targets of another superfamily (or family) ignored, the self hit left out; the mean over queries with
a true target (:func:`search_bench.datasets.scop_metrics`). Calibration: hits to another fold with E ≤ x per
query. Cost: CPU seconds per query of the search (database building apart), and the ratio to jackhmmer -N 3's.

HHblits-style search (Remmert et al. 2012, Nat. Methods 9:173) — this script measures it, it implements nothing of it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from search import machine  # noqa: E402
from search_bench import datasets, report, tools  # noqa: E402
from workflow_lib.errors import InputError  # noqa: E402
from workflow_lib.seqio.atomic import write_text_atomic  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
WORK = ROOT / "benchmarks" / "_work" / "remote"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## Remote homologs: SCOP superfamilies"
DEFAULT_TOOLS = ("jackhmmer", "hhblits", "mmseqs", "phmmer", "trackfold", "trackfold_fast", "trackfold_profiles")


def catalogue() -> dict[str, tools.Tool]:
    found = {tool.name: tool for tool in tools.all_tools(3)}
    found["phmmer"] = tools.Phmmer()
    if hasattr(tools, "TrackfoldProfiles"):
        found["trackfold_profiles"] = tools.TrackfoldProfiles()
    return found


def run(args: argparse.Namespace) -> int:
    known = catalogue()
    unknown = [name for name in args.tools if name not in known]
    if unknown:
        raise InputError(f"unknown tools {unknown} (known: {', '.join(known)})")
    dataset = datasets.load_scop(SHARED, args.queries)
    db_fasta = tools.write_records(WORK / "inputs" / "db.fasta", dataset.database)
    query_path = tools.write_records(WORK / "inputs" / f"queries_{len(dataset.queries)}.fasta", dataset.queries)
    rows = []
    for name in args.tools:
        tool = known[name]
        ok, why = tool.available()
        row = {"name": name, "label": tool.label, "status": "ok" if ok else why}
        rows.append(row)
        if not ok:
            continue
        record = tool.run(query_path, db_fasta, WORK / name, len(dataset.queries), len(dataset.database),
                          force=name in args.force)
        hits = tool.load_hits(WORK / name)
        row["run"] = record
        row["scop"] = datasets.scop_metrics(dataset, hits)
        print(f"[remote] {name}: ROC1 superfamily {row['scop']['roc1_superfamily']:.3f}, "
              f"{record['search']['cpu_s'] / len(dataset.queries):.2f} CPU-s/query", file=sys.stderr, flush=True)
    results = {"finished": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(), "note": dataset.note,
               "tools": rows}
    write_text_atomic(WORK / "results.json", json.dumps(results, indent=1, default=float))
    text = markdown(results, len(dataset.queries))
    print(text)
    if not args.no_write:
        existing = RESULTS.read_text() if RESULTS.exists() else "# Benchmarks\n"
        write_text_atomic(RESULTS, report.replace_section(existing, SECTION, text))
    return 0


def markdown(results: dict, n_queries: int) -> str:
    rows = [r for r in results["tools"] if r["status"] == "ok"]
    jack = next((r for r in rows if r["name"] == "jackhmmer"), None)
    jack_cpu = jack["run"]["search"]["cpu_s"] / n_queries if jack else None
    parts = [
        f"Written by `benchmarks/remote_homology.py` on {results['finished']}. Machine: {results['machine']}; "
        "shared with other jobs: compare CPU seconds and ratios within one run. Every tool on 1 CPU under "
        "`nice -n 10`.",
        "",
        f"Set: MMseqs2's SCOP-on-UniProt benchmark cut to SCOP 1.75 domains; {results['note']}. ROC1 per query "
        "(true targets ranked by E-value before the first false one), mean over queries with a true target; true = "
        "same family / superfamily / fold, false = another fold, same fold but another superfamily ignored, self "
        "hit left out. False hits: hits to another fold per query.",
        "",
        "| tool | ROC1 superfamily | ROC1 family | ROC1 fold | CPU s / query | × jackhmmer CPU | peak RSS MiB | "
        "false hits E ≤ 1 / E ≤ 10 per query | DB build CPU s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        s, run = row["scop"], row["run"]
        cpu = run["search"]["cpu_s"] / n_queries
        ratio = f"{cpu / jack_cpu:.2f}" if jack_cpu else "–"
        calibration = s["calibration_per_query"]
        parts.append(f"| {row['label']} | {s['roc1_superfamily']:.3f} | {s['roc1_family']:.3f} | "
                     f"{s['roc1_fold']:.3f} | {cpu:.2f} | {ratio} | {run['search']['peak_rss_kib'] / 1024:.0f} | "
                     f"{calibration[3]:.2f} / {calibration[4]:.2f} | {run['build']['cpu_s']:.0f} |")
    missing = [r for r in results["tools"] if r["status"] != "ok"]
    if missing:
        parts += ["", "Not run: " + "; ".join(f"{r['label']} ({r['status']})" for r in missing) + "."]
    first = rows[0]["scop"] if rows else {}
    parts += ["", f"Queries with a true target: family {first.get('queries_family', 0)}, superfamily "
              f"{first.get('queries_superfamily', 0)}, fold {first.get('queries_fold', 0)}.", "",
              "Commands (`Q` = queries, `DB` = the domains' FASTA, `N` = database size):", ""]
    for row in rows:
        for command in row["run"]["build"]["commands"] + row["run"]["search"]["commands"]:
            parts.append(f"- `{shorten(command)}`")
    return "\n".join(parts)


def shorten(command: str) -> str:
    return command.replace(str(WORK) + "/", "_work/remote/").replace(str(ROOT) + "/", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=lambda s: s.split(","), default=list(DEFAULT_TOOLS))
    parser.add_argument("--queries", type=int, default=600, help="query subsample (default 600)")
    parser.add_argument("--force", default=[], type=lambda s: s.split(","), help="rerun these tools")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch RESULTS.md")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
