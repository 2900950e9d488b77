"""Paired timing of the search benchmark (benchmarks/search_bench/paired.py): two tools at once, one core each.

The fake tool below runs a real child process that writes the cores it was allowed to run on, so the tests
check the pinning the benchmark relies on, not just the bookkeeping.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from search_bench import paired, tools  # noqa: E402
from workflow_lib.errors import InputError, ToolError  # noqa: E402

needs_taskset = pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) not installed")
AFFINITY = "import os, sys; open(sys.argv[1], 'w').write(' '.join(map(str, sorted(os.sched_getaffinity(0)))))"


class CoreReporter(tools.Tool):
    """Writes the cores its search process may use as its only 'hit'."""

    def __init__(self, name: str, fail: bool = False):
        self.name = self.label = name
        self.fail = fail

    def available(self):
        return True, ""

    def search(self, queries, db_fasta, db_dir, work, n_db):
        code = "raise SystemExit(3)" if self.fail else AFFINITY
        return tools.run_measured([sys.executable, "-c", code, str(work / "cores.txt")])

    def hits(self, work):
        return pd.DataFrame({"cores": [(work / "cores.txt").read_text()]})


def test_core_pairs_swap_every_round_and_need_two_cores():
    assert paired.core_pairs([0, 1], 3) == [(0, 1), (1, 0), (0, 1)]
    assert paired.core_pairs([2, 5, 7], 2) == [(2, 5), (5, 2)]
    with pytest.raises(InputError, match="needs 2 cores"):
        paired.core_pairs([0], 2)
    with pytest.raises(InputError, match="at least one round"):
        paired.core_pairs([0, 1], 0)


@needs_taskset
def test_pinned_commands_run_on_the_given_core_only(tmp_path):
    core = paired.usable_cores()[-1]
    out = tmp_path / "cores.txt"
    with tools.pinned({core}):
        tools.run_measured([sys.executable, "-c", AFFINITY, str(out)])
    assert out.read_text() == str(core)
    tools.run_measured([sys.executable, "-c", AFFINITY, str(out)])  # outside the block: not pinned
    assert out.read_text() == " ".join(map(str, sorted(os.sched_getaffinity(0))))


@needs_taskset
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="paired timing needs 2 cores")
def test_rounds_pin_each_tool_to_its_own_core_and_swap(tmp_path):
    pair = [CoreReporter("first"), CoreReporter("second")]
    a, b = paired.usable_cores()[:2]
    rounds = paired.run_rounds(pair, tmp_path / "q.fasta", tmp_path / "db.fasta", tmp_path, 10, rounds=2)
    assert [(r["first"]["core"], r["second"]["core"]) for r in rounds] == [(a, b), (b, a)]
    for number, record in enumerate(rounds, 1):
        for tool in pair:
            written = (tmp_path / tool.name / f"paired_{number}" / "cores.txt").read_text()
            assert written == str(record[tool.name]["core"])
            assert record[tool.name]["hits"] == 1 and record[tool.name]["cpu_s"] >= 0
        assert record["ratio"] == pytest.approx(record["second"]["cpu_s"] / max(record["first"]["cpu_s"], 1e-9))
    text = paired.markdown(pair, {"pfam": {"queries": 10, "database": 20, "rounds": rounds}}, "test machine", "now")
    assert "| 1 |" in text and "| 2 |" in text and "Mean ratio" in text


@needs_taskset
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="paired timing needs 2 cores")
def test_a_failed_search_fails_the_round(tmp_path):
    pair = [CoreReporter("first"), CoreReporter("second", fail=True)]
    with pytest.raises(ToolError, match="exit code 3"):
        paired.run_rounds(pair, tmp_path / "q.fasta", tmp_path / "db.fasta", tmp_path, 10, rounds=1)


def test_each_pair_writes_its_own_section():
    assert paired.section_title(["jackhmmer", "trackfold"]) == paired.SECTION
    other = paired.section_title(["jackhmmer", "trackfold_fast"])
    assert other == f"{paired.SECTION}: jackhmmer and trackfold_fast"
    text = "# B\n\n" + paired.SECTION + "\n\nold default\n\n## Next\n\nkept\n"
    from search_bench import report
    both = report.replace_section(text, other, "new pair")
    assert "old default" in both and "new pair" in both and "kept" in both
