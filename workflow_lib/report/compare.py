"""Compare two results folders: are two runs of the same configuration identical?

Every file must exist in both and be byte-identical, except

- ``benchmarks/`` (Snakemake's timing files) and hidden files (a killed writer's ``.name.tmp``), which are
  skipped;
- Parquet tables, which are compared by content with their measured columns (:func:`is_measured`: seconds,
  CPU seconds, peak memory) left out: a table that only differs in how long a job took is the same result;
- per-protein receipts (``*.done.json``, :mod:`workflow_lib.seqio.receipts`), which are compared as JSON
  without their row's measured columns;
- figures that plot measured run times (:data:`TIMING_FIGURES`), which are skipped.

``python -m workflow_lib.report.compare RESULTS_A RESULTS_B`` prints the differences and exits 1 when there
are any (.ci/slurm/run_example.sh compares a local and a Slurm run this way).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

TIMING_COLUMNS = frozenset({"seconds", "cpu_seconds", "max_rss_mb"})
TIMING_FIGURES = frozenset({"runtime.png"})
RECEIPT_SUFFIX = ".done.json"


def is_measured(column: str) -> bool:
    """A column holding a measurement of the run (time, memory), not a result."""
    return column in TIMING_COLUMNS or column.startswith("seconds_")


def result_files(results: str | Path) -> list[str]:
    """Relative paths of the finished result files (no benchmarks, no hidden temporary files)."""
    results = Path(results)
    return sorted(str(p.relative_to(results)) for p in results.rglob("*")
                  if p.is_file() and "benchmarks" not in p.relative_to(results).parts
                  and p.name not in TIMING_FIGURES
                  and not any(part.startswith(".") for part in p.relative_to(results).parts))


def _table_without_timings(path: Path) -> pa.Table:
    table = pq.read_table(path)
    return table.drop_columns([c for c in table.column_names if is_measured(c)])


def _receipt_without_timings(path: Path) -> object:
    """A per-protein receipt (:mod:`workflow_lib.seqio.receipts`) without its row's measured columns."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return f"unreadable: {error}"
    if isinstance(record, dict) and isinstance(record.get("row"), dict):
        record["row"] = {k: v for k, v in record["row"].items() if not is_measured(k)}
    return record


def compare_results(first: str | Path, second: str | Path) -> list[str]:
    """The differences between two results folders (empty when they hold the same results)."""
    first, second = Path(first), Path(second)
    missing = [f"not a folder: {p}" for p in (first, second) if not p.is_dir()]
    if missing:
        return missing
    names_a, names_b = result_files(first), result_files(second)
    problems = [f"only in {first}: {n}" for n in sorted(set(names_a) - set(names_b))]
    problems += [f"only in {second}: {n}" for n in sorted(set(names_b) - set(names_a))]
    for name in sorted(set(names_a) & set(names_b)):
        a, b = first / name, second / name
        if a.read_bytes() == b.read_bytes():
            continue
        if name.endswith(RECEIPT_SUFFIX):
            if _receipt_without_timings(a) == _receipt_without_timings(b):
                continue
            problems.append(f"{name}: receipts differ (beyond the measured seconds)")
        elif name.endswith(".parquet"):
            try:
                if _table_without_timings(a).equals(_table_without_timings(b), check_metadata=True):
                    continue
            except (pa.ArrowInvalid, OSError) as error:
                problems.append(f"{name}: unreadable Parquet ({error})")
                continue
            problems.append(f"{name}: tables differ (beyond the measured time and memory columns)")
        else:
            problems.append(f"{name}: bytes differ")
    return problems


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m workflow_lib.report.compare RESULTS_A RESULTS_B", file=sys.stderr)
        return 2
    problems = compare_results(*argv)
    for problem in problems:
        print(problem)
    if not problems:
        print(f"identical: {len(result_files(argv[0]))} result files (benchmarks, timing columns and figures excluded)")
    return 1 if problems else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
