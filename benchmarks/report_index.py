"""How the proteome index of the HTML report scales: page size, load, sort, filter and paging in headless Chromium.

A real summary (``results/{proteome}/summary.parquet`` of a finished run, by default the bundled example's) is
tiled to each row count asked for (every copy renamed ``{protein}~{k}``, the values kept, so the mix of lengths,
depths, templates and pLDDT is the real one), written as ``index.html`` with the report's assets, and opened in
Debian's ``chromium`` (software WebGL, as in the browser test). A probe page times, with ``performance.now()``
around each event (the table's handlers draw synchronously): the index's load until the table is ready, a sort by
mean pLDDT and its reverse, typing a name filter, a pLDDT minimum, and the next page. Median of ``--repeats``
runs of each step in one browser per row count.

    python benchmarks/report_index.py --rows 4352 100000
    python benchmarks/report_index.py --summary results/ecoli/summary.parquet --rows 4352

Prints one Markdown table (milliseconds; the HTML's size in MB).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workflow_lib.report.pages import index_page  # noqa: E402
from workflow_lib.report.vendor import copy_assets  # noqa: E402

PROBE = """<!DOCTYPE html><html><body><pre id="out">pending</pre>
<iframe id="page" width="1200" height="900"></iframe>
<script>
var frame = document.getElementById("page"), t0 = performance.now(), repeats = %(repeats)d;
function median(xs) { xs = xs.slice().sort(function (a, b) { return a - b; }); return xs[xs.length >> 1]; }
function timed(action) {
  var times = [];
  for (var k = 0; k < repeats; k++) { var t = performance.now(); action(k); times.push(performance.now() - t); }
  return median(times);
}
function fire(node, value, kind) { node.value = value; node.dispatchEvent(new Event(kind || "input")); }
frame.addEventListener("load", function () {
  var doc = frame.contentDocument, result = {};
  result.load = performance.now() - t0;
  result.status = doc.getElementById("protein-table").getAttribute("data-status");
  var header = doc.querySelector("th[data-key=mean_plddt]");
  result.sort = timed(function () { header.click(); });
  var search = doc.querySelector("input[type=search]");
  result.filter_text = timed(function (k) { fire(search, k %% 2 ? "hg00368" : "hg003686_7"); });
  fire(search, "");
  var minimum = doc.querySelector("input[aria-label='mean pLDDT min']");
  result.filter_min = timed(function (k) { fire(minimum, k %% 2 ? "50" : "70"); });
  fire(minimum, "");
  var next = Array.prototype.filter.call(doc.querySelectorAll("button"),
                                         function (b) { return /next/i.test(b.textContent); })[0];
  result.next_page = next ? timed(function () { next.click(); }) : null;
  result.rows_drawn = doc.querySelectorAll("table.proteins tbody tr").length;
  result.info = doc.querySelector(".table-info").textContent;
  document.getElementById("out").textContent = "RESULT " + JSON.stringify(result);
});
frame.src = "%(page)s";
</script></body></html>
"""
FLAGS = ("--headless", "--no-sandbox", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
         "--allow-file-access-from-files", "--virtual-time-budget=120000")


def tiled(summary: pd.DataFrame, rows: int) -> pd.DataFrame:
    """``rows`` rows of ``summary`` repeated in order, copies after the first renamed ``{name}~{k}``."""
    planned = summary[summary["chunk"] >= 0].reset_index(drop=True)
    if planned.empty:
        raise SystemExit("the summary has no predicted protein")
    copies = -(-rows // len(planned))
    parts = []
    for k in range(copies):
        part = planned.copy()
        if k:
            part["protein"] = part["protein"] + f"~{k}"
            part["safe_id"] = part["safe_id"] + f"~{k}"
        parts.append(part)
    return pd.concat(parts, ignore_index=True).iloc[:rows]


def measure(chromium: str, summary: pd.DataFrame, rows: int, repeats: int, work: Path) -> dict:
    folder = work / f"index_{rows}"
    folder.mkdir()
    copy_assets(folder)
    page = folder / "index.html"
    page.write_text(index_page("benchmark", tiled(summary, rows)))
    probe = folder / "probe.html"
    probe.write_text(PROBE % {"page": page.as_uri(), "repeats": repeats})
    completed = subprocess.run([chromium, *FLAGS, "--dump-dom", probe.as_uri()], capture_output=True, text=True,
                               timeout=600)
    match = re.search(r"RESULT (\{.*\})", completed.stdout)
    if not match:
        raise SystemExit(f"the probe did not finish for {rows} rows:\n{completed.stdout[-2000:]}")
    result = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    if result.get("status") != "ready":
        raise SystemExit(f"the index did not draw its table for {rows} rows: {result}")
    result["mb"] = page.stat().st_size / 1e6
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summary", type=Path, default=ROOT / "results" / "anaerococcus" / "summary.parquet")
    parser.add_argument("--rows", type=int, nargs="+", default=[4352, 100_000])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    chromium = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
                    None)
    if chromium is None:
        raise SystemExit("no Chromium on PATH (Debian: apt-get install chromium)")
    summary = pd.read_parquet(args.summary)
    shown = args.summary.resolve()
    shown = shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown
    print(f"summary: {shown} ({len(summary)} proteins), median of {args.repeats} runs per step, ms\n")
    print("| rows | index.html MB | load to ready | sort by pLDDT | name filter | pLDDT minimum | next page |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            r = measure(chromium, summary, rows, args.repeats, Path(tmp))
            steps = [r["load"], r["sort"], r["filter_text"], r["filter_min"], r["next_page"]]
            cells = " | ".join("-" if v is None else f"{v:.0f}" for v in steps)
            print(f"| {rows:,} | {r['mb']:.1f} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
