"""Homology search side by side: trackfold search vs jackhmmer -N 3, hhblits -n 2, mmseqs2.

One command fills every column (peers are cached under benchmarks/_work/search/, so only what changed runs)::

    .venv/bin/python benchmarks/search.py                     # all tools, both sets, writes RESULTS.md section
    .venv/bin/python benchmarks/search.py --tools trackfold   # (re)run ours only; cached peers are read back
    .venv/bin/python benchmarks/search.py --scaling           # "How cost grows" (trackfold, mmseqs, jackhmmer)
    .venv/bin/python benchmarks/search.py --paired jackhmmer,trackfold --datasets pfam   # speed ratio, paired

Options: ``--datasets pfam,cath``, ``--subsample N`` (deterministic query subsample of both sets; the
database stays whole), ``--tool-subsample hhblits=600`` (fewer queries for one slow tool: every tool is then
also scored on that common subset, so the rows stay comparable), ``--force TOOL``, ``--no-write``,
``--paired A,B`` (the two tools searching together, one core each, cores swapped for a second round: a speed
ratio that the machine's changing load does not skew; see :mod:`search_bench.paired`).
The peer runs recorded in RESULTS.md used ``--tool-subsample`` as stated there.

Sets (see :mod:`search_bench.datasets`): Pfam pairs (DCTdomain pfam-max50; each of 1,867 sequences against all
1,867; a pair is scored by the better E-value of its two directions, no hit = worst; ROC AUC and sensitivity at
1% FPR over 5,228 homologous and 5,222 non-homologous pairs) and CATH (ProtTucker/EAT test300 ∪ val200, 500
domains against themselves; ROC1 per query, self hit excluded). The CATH set has no two domains of one
superfamily, so ROC1 is reported at the topology (C.A.T) level; the table says so.

Calibration: false hits with E ≤ x per query for x in 0.001 … 10 (Pfam: directed non-homologous pairs scaled
to the database size; CATH: hits to other superfamilies per query). Timing: wall and CPU seconds per query
and peak RSS of the search processes, 1 CPU each, under ``nice -n 10`` (shared machine: compare within a run).
Writes the section "## Homology search: peers" of benchmarks/RESULTS.md (``--section`` to rename), the plot
benchmarks/search_bench/search_benchmark.png and benchmarks/_work/search/results.json.
HHblits-style search (Remmert et al. 2012, Nat. Methods 9:173) — this script measures it, it implements nothing of it.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from search_bench import datasets, metrics, report, tools  # noqa: E402
from workflow_lib.errors import InputError  # noqa: E402
from workflow_lib.seqio.atomic import write_text_atomic  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
WORK = ROOT / "benchmarks" / "_work" / "search"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
PLOT = ROOT / "benchmarks" / "search_bench" / "search_benchmark.png"
SECTION = "## Homology search: peers"


def parse_tool_subsample(values: list[str]) -> dict[str, int]:
    result = {}
    for value in values:
        name, _, count = value.partition("=")
        if not count.isdigit() or int(count) <= 0:
            raise InputError(f"--tool-subsample expects TOOL=N with N > 0, got {value!r}")
        result[name] = int(count)
    return result


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os
    return f"{model}, {len(os.sched_getaffinity(0))} cores visible, {platform.system()} {platform.release()}"


def evaluate(dataset: datasets.Dataset, hits, cath_level: str) -> dict:
    if dataset.name == "pfam":
        return datasets.pfam_metrics(dataset, hits)
    result = datasets.cath_metrics(dataset, hits, level=cath_level)
    result["superfamily"] = datasets.cath_metrics(dataset, hits, level="superfamily")["queries_with_true_targets"]
    return result


def restrict(dataset: datasets.Dataset, query_ids: list[str]) -> datasets.Dataset:
    keep = set(query_ids)
    return datasets.Dataset(dataset.name, [q for q in dataset.queries if q[0] in keep], dataset.database,
                            pairs=dataset.pairs, labels=dataset.labels, note=dataset.note)


def run_comparison(args: argparse.Namespace) -> int:
    tool_subsample = parse_tool_subsample(args.tool_subsample)
    rows: dict[str, dict] = {t.name: {"name": t.name, "label": t.label, "status": "ok"} for t in tools.all_tools(args.iterations)}
    for tool in tools.all_tools(args.iterations):
        ok, why = tool.available()
        if not ok:
            rows[tool.name]["status"] = why if tool.name != "trackfold" else "not yet run"
            rows[tool.name]["why"] = why
    notes = []
    for name in args.datasets:
        dataset = datasets.load(name, SHARED, args.subsample)
        folder = WORK / name
        db_fasta = tools.write_records(folder / "inputs" / "db.fasta", dataset.database)
        query_sets: dict[str, list[str]] = {}
        hits = {}
        for tool in tools.all_tools(args.iterations):
            if rows[tool.name]["status"] != "ok":
                continue
            wanted = tool_subsample.get(tool.name)
            cached_path = folder / tool.name / "search" / "run.json"
            if tool.name not in args.tools and wanted is None and cached_path.exists():
                # read back whatever query subsample the cached run used (e.g. --tool-subsample hhblits=N)
                wanted = json.loads(cached_path.read_text()).get("n_queries")
            ids = datasets.stable_subsample(dataset.query_ids, wanted, salt=name)
            queries = [q for q in dataset.queries if q[0] in set(ids)]
            query_path = folder / "inputs" / f"queries_{len(ids)}.fasta"
            tools.write_records(query_path, queries)
            work = folder / tool.name
            if tool.name in args.tools:
                record = tool.run(query_path, db_fasta, work, len(ids), len(dataset.database),
                                  force=tool.name in args.force)
            else:
                record_path = work / "search" / "run.json"
                if not record_path.exists():
                    rows[tool.name]["status"] = ("not yet run" if tool.name == "trackfold"
                                                 else "not run (not selected, nothing cached)")
                    continue
                record = json.loads(record_path.read_text())
                if record.get("key") != tools.digest(query_path, db_fasta, tool.config()):
                    rows[tool.name]["status"] = "stale cache (inputs or commands changed): rerun with --tools"
                    continue
            rows[tool.name][f"{name}_run"] = record
            query_sets[tool.name] = ids
            hits[tool.name] = tool.load_hits(work)
            rows[tool.name][name] = evaluate(restrict(dataset, ids), hits[tool.name], args.cath_level)
            print(f"[search-bench] {name} {tool.name}: {len(ids)} queries, "
                  f"{record['search']['wall_s'] / max(len(ids), 1):.2f} s/query", file=sys.stderr, flush=True)
        # common subset when some tool searched fewer queries
        if query_sets and len({len(v) for v in query_sets.values()}) > 1:
            common = sorted(set.intersection(*(set(v) for v in query_sets.values())))
            notes.append(f"{name}: tools searched different query subsets "
                         f"({', '.join(f'{k} {len(v)}' for k, v in query_sets.items())}); rows '{name}, common "
                         f"subset' score every tool on the {len(common)} queries all of them searched")
            for tool_name, frame in hits.items():
                sub = frame[frame["query"].isin(common)]
                rows[tool_name][f"{name}_common"] = evaluate(restrict(dataset, common), sub, args.cath_level)
        rows_note = dataset.note
        notes.append(f"{name}: {rows_note}")
    results = {"finished": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(), "notes": notes,
               "tools": list(rows.values())}
    write_text_atomic(WORK / "results.json", json.dumps(results, indent=1, default=float))
    text = markdown(results, args)
    print(text)
    if not args.no_write:
        report.plot(list(rows.values()), PLOT)
        existing = RESULTS.read_text() if RESULTS.exists() else "# Benchmarks\n"
        write_text_atomic(RESULTS, report.replace_section(existing, args.section, text))
    return 0


def markdown(results: dict, args: argparse.Namespace) -> str:
    rows = results["tools"]
    parts = [
        f"Written by `benchmarks/search.py` on {results['finished']}. Machine: {results['machine']}; shared with "
        "other jobs, so wall times carry ±30% or more: compare CPU seconds and ratios within one run. Every tool runs "
        "on 1 CPU under `nice -n 10`; time per query = search time of the whole query set / queries (database "
        "building reported apart). Peak RSS = largest resident set of one search process (with its children). "
        "Peer runs are cached (`benchmarks/_work/search/`) and read back unless rerun: the details below say when "
        "each tool searched each set.",
        "",
        "Sets: **Pfam pairs** (DCTdomain pfam-max50: 1,867 sequences, each searched against all 1,867; a labelled "
        "pair is scored by the better E-value of its two directions, no hit = worst; 5,228 homologous pairs "
        "(hom-pfam, hom-clan, hom-mixed) vs 5,222 non-homologous). **CATH** (ProtTucker/EAT test300 ∪ val200: 500 "
        "CATH v4.3 domains searched against the same 500; ROC1 per query = fraction of true targets ranked above "
        "the first false one, self hit excluded). No two of the 500 domains share a superfamily, so superfamily-level "
        "ROC1 is undefined here; the CATH column uses the **topology (C.A.T) level** (true = same topology; "
        "queries without a same-topology partner are left out of the mean). Sequence search rarely links different "
        "superfamilies of one fold, so expect small values for every tool.",
        "",
    ]
    parts.append(report.main_table(rows))
    for name in ("pfam", "cath"):
        if any(r.get(f"{name}_common") for r in rows):
            parts += ["", f"Scored on the common query subset of `{name}` (all tools on the same queries):", ""]
            parts.append("| tool | " + ("ROC AUC | sens. at 1% FPR |" if name == "pfam" else "mean ROC1 |"))
            parts.append("|---|---|---|" if name == "pfam" else "|---|---|")
            for r in rows:
                sub = r.get(f"{name}_common")
                if not sub:
                    parts.append(f"| {r['label']} | {r['status'] if r['status'] != 'ok' else '–'} |")
                elif name == "pfam":
                    parts.append(f"| {r['label']} | {sub['roc_auc']:.3f} | {sub['sens_at_1pct_fpr']:.3f} |")
                else:
                    parts.append(f"| {r['label']} | {sub['mean_roc1']:.3f} |")
    parts += ["", "Details per set:", ""]
    for row in rows:
        if row.get("status") != "ok":
            continue
        bits = []
        if row.get("pfam"):
            p, run = row["pfam"], row["pfam_run"]
            bits.append(f"Pfam: {run['n_queries']} queries, {p['positives_found']}/{p['pairs_positive']} homologous "
                        f"pairs with a hit, search {run['search']['wall_s']:.0f} s wall / {run['search']['cpu_s']:.0f} s "
                        f"CPU" + (f", DB build {run['build']['wall_s']:.0f} s wall / {run['build']['cpu_s']:.0f} s CPU"
                                 if run['build']['commands'] else ""))
        if row.get("cath"):
            c, run = row["cath"], row["cath_run"]
            bits.append(f"CATH: {run['n_queries']} queries ({c['queries_with_true_targets']} with a same-topology "
                        f"partner, {c['superfamily']} with a same-superfamily partner), search "
                        f"{run['search']['wall_s']:.0f} s wall / {run['search']['cpu_s']:.0f} s CPU")
        version = (row.get("pfam_run") or row.get("cath_run") or {}).get("version", "")
        # a cached peer run is read back, not rerun: say when each set was searched
        ran = ", ".join(f"{name} {row[f'{name}_run'].get('finished', '?')}" for name in ("pfam", "cath")
                        if row.get(f"{name}_run"))
        parts.append(f"- **{row['label']}** ({version}; searched {ran}): " + "; ".join(bits))
    parts += ["", "Calibration, Pfam: false hits with E ≤ x per query = (directed non-homologous pairs with E ≤ x) × "
              "1,867 / (directed non-homologous pairs searched), i.e. scaled to a database of unrelated sequences:", ""]
    parts.append(report.calibration_table(rows, "pfam"))
    scored = [r for r in rows if r.get("status") == "ok" and r.get("pfam")]
    directed = sorted({r["pfam"]["calibration_directed_pairs"] for r in scored})
    if directed:
        n_db = scored[0]["pfam"]["database_sequences"]
        parts += ["", "In brackets: the false hits counted. A calibrated tool expects x × (directed pairs) / "
                  f"{n_db:,} of them: " + "; ".join(
                      f"{d:,} directed pairs → {d / n_db:.2g} at E ≤ 1, {10 * d / n_db:.2g} at E ≤ 10" for d in directed)
                  + ". How surprising each count at E ≤ 1 and E ≤ 10 is for a calibrated tool (Poisson tail "
                  "P(≥ count)): " + "; ".join(_surprise(r["label"], r["pfam"]) for r in scored) + "."]
    parts += ["", "Calibration, CATH: hits to a domain of another superfamily with E ≤ x per query (499 of the 499 "
              "other domains are of another superfamily):", ""]
    parts.append(report.calibration_table(rows, "cath"))
    parts += ["", "In brackets: the false hits counted (queries × 499 different-superfamily targets are searched)."]
    parts += ["", "Reading the calibration rows: HMMER's acceleration filters pass a target only if its Forward "
              "P-value < 1e-5, so jackhmmer cannot report E-values above about N × 1e-5 (0.02 on Pfam, 0.005 on "
              "CATH); its counts at large x are truncated by design, not a sign of conservative E-values. Counts "
              "rest on few events (Pfam: the directed non-homologous pairs amount to a few database searches' "
              "worth of unrelated targets; see `calibration_directed_pairs` in _work/search/results.json), so "
              "small values are noisy.", "",
              f"Plot: `{PLOT.relative_to(ROOT)}` (Pfam ROC, both calibration curves).", "",
              "Commands (run by `benchmarks/search_bench/tools.py`; `Q` = queries, `DB` = the set's FASTA, `N` = "
              "database size):", ""]
    seen = set()
    for row in rows:
        for name in ("pfam", "cath"):
            run = row.get(f"{name}_run")
            if not run or row["name"] in seen:
                continue
            seen.add(row["name"])
            for command in run["build"]["commands"] + run["search"]["commands"]:
                parts.append(f"- `{shorten(command)}`")
    parts += ["", "Notes: " + "; ".join(results["notes"]) + "."]
    if any(r["name"] == "trackfold" and r["status"] != "ok" for r in rows):
        parts += ["", "trackfold: **not yet run** for this section (its search was still being written). Fill its "
                  "row with `.venv/bin/python benchmarks/search.py --tools trackfold` (peers are read back from "
                  "the cache; add `--tool-subsample trackfold=250` to search the same 250-query subsets as hhblits)."]
    return "\n".join(parts)


def _surprise(label: str, result: dict) -> str:
    """``label: 3 vs 0.71 expected (P = 0.036) at E ≤ 1, …`` for the calibration note."""
    parts = []
    for x in (1.0, 10.0):
        position = list(metrics.CALIBRATION_THRESHOLDS).index(x)
        count = int(result["calibration_counts"][position])
        expected = x * result["calibration_directed_pairs"] / result["database_sequences"]
        parts.append(f"{count} vs {expected:.2g} (P = {metrics.poisson_tail(count, expected):.2g}) at E ≤ {x:g}")
    return f"**{label}**: " + ", ".join(parts)


def shorten(command: str) -> str:
    return command.replace(str(WORK) + "/", "_work/search/").replace(str(ROOT) + "/", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="pfam,cath", type=lambda s: s.split(","))
    parser.add_argument("--tools", type=lambda s: s.split(","),
                        default=",".join(["jackhmmer", "hhblits", "mmseqs", "trackfold", "trackfold_fast",
                                          "trackfold_sensitive", "trackfold_context"]))
    parser.add_argument("--subsample", type=int, help="deterministic query subsample of every set")
    parser.add_argument("--tool-subsample", action="append", default=[], metavar="TOOL=N",
                        help="fewer queries for one tool (repeatable)")
    parser.add_argument("--iterations", type=int, default=3, help="trackfold search iterations (default 3)")
    parser.add_argument("--cath-level", default="topology", choices=list(datasets.CATH_LEVELS))
    parser.add_argument("--force", default=[], type=lambda s: s.split(","), help="rerun these tools")
    parser.add_argument("--section", default=SECTION)
    parser.add_argument("--no-write", action="store_true", help="print, do not touch RESULTS.md or the plot")
    parser.add_argument("--scaling", action="store_true", help='"How cost grows" instead of the comparison')
    parser.add_argument("--scaling-factors", default="1,4,16", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--scaling-queries", default="10,100,1000", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--scaling-db-queries", type=int, default=10,
                        help="queries per job in the database-size sweep (default 10)")
    parser.add_argument("--scaling-base", default="sprot_Archaea",
                        help="Swiss-Prot subset(s) of shared/data/swissprot_subsets_prokka, '+'-joined")
    parser.add_argument("--scaling-tools", default="trackfold,mmseqs,jackhmmer", type=lambda s: s.split(","))
    parser.add_argument("--paired", type=lambda s: s.split(","), metavar="A,B",
                        help="time two tools together, pinned to one core each, cores swapped per round")
    parser.add_argument("--paired-queries", type=int, default=250, help="queries per paired search (default 250)")
    parser.add_argument("--paired-rounds", type=int, default=2, help="paired rounds (default 2)")
    args = parser.parse_args(argv)
    for name in args.datasets:
        if name not in ("pfam", "cath"):
            raise InputError(f"unknown dataset {name!r} (pfam, cath)")
    if args.scaling:
        from search_bench import scaling
        return scaling.run(args, SHARED, WORK / "scaling", RESULTS, machine())
    if args.paired:
        from search_bench import paired
        return paired.run(args, SHARED, WORK, RESULTS, machine())
    return run_comparison(args)


if __name__ == "__main__":
    sys.exit(main())
