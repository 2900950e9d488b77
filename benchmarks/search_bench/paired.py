"""Paired timing: two search tools at the same time, each pinned to its own core, then with the cores swapped.

Sequential runs on a shared machine drift with the load of the other tenants, and not by the same amount for
every tool. On a shared AMD host the same trackfold Pfam search (250 queries, same code) took
130 s of CPU on one day and 147–156 s on the next, while ``jackhmmer -N 3`` took 82–86 s in both. A ratio
from two sequential runs of one table can therefore be off by 15%.

Here the two tools run *together*, one per core (``taskset``), so both see the same load; a second round swaps
the cores, so a difference between the two cores cancels in the mean. The number to quote is the ratio of CPU
seconds (user + system of the search processes), per round and its mean. Databases are built (or reused) first
and are not timed; the searches are never cached. Each round's hits are read back and counted, so a failed or
partial search cannot pass for a fast one.

    .venv/bin/python benchmarks/search.py --paired jackhmmer,trackfold --datasets pfam

The query set is the deterministic subsample of :func:`search_bench.datasets.stable_subsample` (``--paired-queries``,
default 250: the subset the peers table uses for hhblits and trackfold).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from search_bench import datasets, report, tools
from workflow_lib.errors import InputError
from workflow_lib.seqio.atomic import write_text_atomic

SECTION = "## Homology search: paired timing against a peer"
"""The section of the default pair (jackhmmer, trackfold); another pair writes its own, titled after its tools
(:func:`section_title`), so the pairs measured stay side by side."""


def section_title(names: list[str]) -> str:
    """``SECTION`` for ``jackhmmer,trackfold``, else ``SECTION: A and B``."""
    return SECTION if names == ["jackhmmer", "trackfold"] else f"{SECTION}: {names[0]} and {names[1]}"


def usable_cores() -> list[int]:
    """The cores this process may run on, ascending."""
    return sorted(os.sched_getaffinity(0))


def core_pairs(cores: list[int], rounds: int) -> list[tuple[int, int]]:
    """(core of the first tool, core of the second) per round: the first two cores, swapped every round."""
    if len(cores) < 2:
        raise InputError(f"paired timing needs 2 cores, this process may use {len(cores)}")
    if rounds < 1:
        raise InputError(f"paired timing needs at least one round, got {rounds}")
    first, second = cores[0], cores[1]
    return [(first, second) if r % 2 == 0 else (second, first) for r in range(rounds)]


def _search_pinned(tool: tools.Tool, core: int, queries: Path, db_fasta: Path, work: Path, run_name: str,
                   n_db: int) -> tuple[tools.Measured, int]:
    """One timed search of ``tool`` on ``core`` into ``work/run_name``; returns its resources and hit count."""
    search_dir = work / run_name
    if search_dir.exists():
        shutil.rmtree(search_dir)
    search_dir.mkdir(parents=True)
    with tools.pinned({core}):
        measured = tool.search(queries, db_fasta, work / "db", search_dir, n_db)
    return measured, len(tool.load_hits(work, run_name))


def run_rounds(pair: list[tools.Tool], queries: Path, db_fasta: Path, folder: Path, n_db: int,
               rounds: int = 2, cores: list[int] | None = None) -> list[dict]:
    """Run the two tools of ``pair`` together, pinned, for ``rounds`` rounds (cores swapped each round).

    Databases must be built (:meth:`tools.Tool.ensure_database`). Returns one record per round: per tool its
    core, wall and CPU seconds and hits, and ``ratio`` = CPU of the second tool / CPU of the first.
    Raises :class:`workflow_lib.errors.ToolError` when a search fails, ``InputError`` for fewer than 2 cores.
    """
    if len(pair) != 2:
        raise InputError(f"paired timing compares exactly two tools, got {len(pair)}")
    records = []
    for number, (core_a, core_b) in enumerate(core_pairs(usable_cores() if cores is None else cores, rounds), 1):
        name = f"paired_{number}"
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(_search_pinned, tool, core, queries, db_fasta, folder / tool.name, name, n_db)
                       for tool, core in zip(pair, (core_a, core_b))]
            results = [future.result() for future in futures]
        record = {"round": number}
        for tool, core, (measured, hits) in zip(pair, (core_a, core_b), results):
            record[tool.name] = {"core": core, "wall_s": measured.wall_s, "cpu_s": measured.cpu_s,
                                 "peak_rss_kib": measured.peak_rss_kib, "hits": hits}
        record["ratio"] = results[1][0].cpu_s / max(results[0][0].cpu_s, 1e-9)
        print(f"[search-bench] paired round {number}: {pair[1].name} / {pair[0].name} CPU = {record['ratio']:.2f}",
              file=sys.stderr, flush=True)
        records.append(record)
    return records


def markdown(pair: list[tools.Tool], by_set: dict[str, dict], machine: str, finished: str) -> str:
    """The RESULTS.md section: one table per set, the mean ratio, what was run."""
    a, b = pair
    parts = [f"Written by `benchmarks/search.py --paired {a.name},{b.name}` on {finished}. Machine: {machine}. "
             f"The two tools search the same queries at the same time, each pinned to its own core (`taskset`, "
             f"`nice -n 10`), and swap cores in the next round, so both see the same load from the machine's other "
             f"tenants (`benchmarks/search_bench/paired.py`). CPU = user + system seconds of the search processes; "
             f"databases built beforehand, not timed.", ""]
    for name, entry in by_set.items():
        rows = entry["rounds"]
        n = entry["queries"]
        parts += [f"**{name}** ({n} queries, database {entry['database']:,} sequences):", "",
                  f"| round | {a.label}: core | CPU s | CPU s per query | {b.label}: core | CPU s | CPU s per query "
                  f"| ratio ({b.name} / {a.name}) |",
                  "|---|---|---|---|---|---|---|---|"]
        for row in rows:
            ra, rb = row[a.name], row[b.name]
            parts.append(f"| {row['round']} | {ra['core']} | {ra['cpu_s']:.1f} | {ra['cpu_s'] / n:.3f} | "
                         f"{rb['core']} | {rb['cpu_s']:.1f} | {rb['cpu_s'] / n:.3f} | {row['ratio']:.2f} |")
        ratios = [row["ratio"] for row in rows]
        spread = f", rounds {min(ratios):.2f}–{max(ratios):.2f}" if len(ratios) > 1 else ""
        hits = "; ".join(f"{tool.name} {sorted({row[tool.name]['hits'] for row in rows})}" for tool in pair)
        parts += ["", f"Mean ratio **{statistics.mean(ratios):.2f}**{spread}. Hits per round (the same in every "
                  f"round for a deterministic tool): {hits}.", ""]
    return "\n".join(parts).rstrip() + "\n"


def run(args, shared: Path, work_root: Path, results: Path, machine: str) -> int:
    """``benchmarks/search.py --paired A,B``: paired rounds on every set of ``--datasets``; writes the section."""
    names = args.paired
    available = {tool.name: tool for tool in tools.all_tools(args.iterations)}
    unknown = [n for n in names if n not in available]
    if len(names) != 2 or unknown:
        raise InputError(f"--paired takes two of {', '.join(available)}, got {','.join(names)}")
    pair = [available[n] for n in names]
    for tool in pair:
        ok, why = tool.available()
        if not ok:
            raise InputError(f"--paired: {tool.name} is not available here ({why})")
    by_set: dict[str, dict] = {}
    for name in args.datasets:
        dataset = datasets.load(name, shared, args.subsample)
        folder = work_root / name
        db_fasta = tools.write_records(folder / "inputs" / "db.fasta", dataset.database)
        ids = datasets.stable_subsample(dataset.query_ids, args.paired_queries, salt=name)
        query_path = tools.write_records(folder / "inputs" / f"queries_{len(ids)}.fasta",
                                         [q for q in dataset.queries if q[0] in set(ids)])
        for tool in pair:
            tool.ensure_database(db_fasta, folder / tool.name, len(dataset.database))
        rounds = run_rounds(pair, query_path, db_fasta, folder, len(dataset.database), args.paired_rounds)
        by_set[name] = {"queries": len(ids), "database": len(dataset.database), "rounds": rounds}
    finished = time.strftime("%Y-%m-%d %H:%M")
    write_text_atomic(work_root / "paired.json", json.dumps(
        {"finished": finished, "machine": machine, "tools": names, "sets": by_set}, indent=1))
    text = markdown(pair, by_set, machine, finished)
    print(text)
    if not args.no_write:
        report.write_section(results, section_title(names), text)
    return 0
