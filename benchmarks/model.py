"""CPU inference time and peak memory of the three-track network (``small`` preset), and column-attention memory.

    nice -n 10 .venv/bin/python benchmarks/model.py [--lengths 100 300 600 1000] [--depths 64 256 1024]
        [--window 300] [--threads 1] [--compare-threads 2] [--column-depths 256 1024 4096] [--column-length 16]
        [--reuse LOG] [--no-write]

Every configuration runs in its own subprocess, so its peak resident memory (``ru_maxrss``) is its own.

* Inference: :func:`workflow_lib.inference.predict.predict_features` path pieces on a synthetic protein of L
  residues with an N-row MSA (random residue codes with 20% gaps, random symmetric co-evolution, no templates;
  the cost does not depend on the values), ``small`` preset with co-evolution input, random weights,
  ``max_msa = N``. For L <= window the whole prediction runs. For L > window the protein is cropped into
  window pairs (crop_plan); running all crops of L = 1000 (21 crops of 300 residues) would take an hour on
  the shared 2-core machine, so the worker runs the first two crops (all crops have ``window`` residues), the
  second with the full-length stitch sums allocated and every page written, and reports the time as
  ``crops x mean crop time`` (marked "extrapolated"). The peak memory is that of a full run: crops run one
  at a time on top of the stitch sums, the only part that grows with L.
* Column attention: one :class:`~workflow_lib.model.msa.ColumnAttention` forward of the ``small`` preset
  (c_m = 64, 4 heads) on ``[N, 16, 64]`` (16 columns, so that plain attention's N x N logits still fit at
  N = 4096) for plain softmax and Performer (FAVOR+), memory above the baseline.

* Threads: the first configuration is run again with ``--compare-threads`` torch threads.

Each measured row is printed as one JSON line (``ROW {...}``); ``--reuse LOG`` takes the rows of an earlier run's
output and measures only what is missing (an interrupted run resumes). Appends/replaces the section
"Three-track inference (CPU)" of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## Three-track inference (CPU)"


def rss_mb() -> float:
    """Peak resident set size of this process so far (MiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cpu_seconds() -> float:
    """User + system CPU time of this process so far (robust to other jobs on a shared machine)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def current_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def synthetic_features(length: int, depth: int, seed: int = 0) -> dict[str, np.ndarray]:
    from workflow_lib.schemas.features import FEATURES, empty_templates

    rng = np.random.default_rng(seed)
    msa = rng.integers(0, 20, size=(depth, length)).astype(np.int8)
    msa[1:][rng.random((depth - 1, length)) < 0.2] = 21
    coevolution = rng.random((length, length, 2)).astype(np.float32)
    coevolution = (coevolution + coevolution.transpose(1, 0, 2)) / 2
    features = {
        "msa": msa, "deletion_matrix": np.zeros((depth, length), np.uint8),
        "deletion_mean": np.zeros(length, np.float32),
        "neff": np.array(depth, np.float32),
        "num_alignments": np.array(depth, np.int32), "profile": np.full((length, 21), 1 / 21, np.float32),
        "residue_index": np.arange(length, dtype=np.int32), "coevolution": coevolution,
        **empty_templates(length)}
    return FEATURES.validate(features, "synthetic")


def worker_inference(length: int, depth: int, window: int, threads: int) -> dict:
    import torch

    from workflow_lib.inference.predict import HEADS_6D, PredictOptions, model_inputs, predict_features, run_network
    from workflow_lib.inference.stitch import PairMean, crop_plan
    from workflow_lib.model import ThreeTrackNetwork, preset

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = ThreeTrackNetwork(preset("small", c_coevolution=2)).eval()
    features = synthetic_features(length, depth)
    baseline = current_rss_mb()
    crops = crop_plan(length, window)
    cpu_start = cpu_seconds()
    start = time.perf_counter()
    if len(crops) == 1:
        predict_features(model, features, PredictOptions(window=window, max_msa=depth, fold="network"))
        seconds = time.perf_counter() - start
        crop_seconds, extrapolated = seconds, False
    else:
        # The state of a full run from its second crop on: the stitch sums of all L x L pairs resident (filled
        # once, so every page is touched), then one more crop's forward pass on top of them.
        accumulator = PairMean(length)
        timed = crops[:2]
        for crop in timed:
            inputs = model_inputs(features, model.config, columns=crop.indices, max_msa=depth)
            (result,) = run_network(model, [inputs], torch.device("cpu"))
            accumulator.add(crop.indices, {head: result[head] for head in HEADS_6D})
            for total in accumulator.total.values():
                total.fill(0.0)
        crop_seconds = (time.perf_counter() - start) / len(timed)
        seconds, extrapolated = crop_seconds * len(crops), True
    crop_cpu = (cpu_seconds() - cpu_start) / (1 if len(crops) == 1 else 2)
    return {"L": length, "N": depth, "threads": threads, "crops": len(crops), "seconds": seconds,
            "crop_seconds": crop_seconds,
            "crop_cpu": crop_cpu, "cpu": crop_cpu * (len(crops) if extrapolated else 1),
            "extrapolated": extrapolated, "baseline_mb": baseline, "peak_mb": rss_mb()}


def worker_column(mode: str, depth: int, length: int, threads: int) -> dict:
    import torch

    from workflow_lib.model import preset
    from workflow_lib.model.msa import ColumnAttention

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = preset("small")
    module = ColumnAttention(config.c_m, config.no_heads_msa, column_attention=mode).eval()
    m = torch.randn(1, depth, length, config.c_m)
    baseline = current_rss_mb()
    start = time.perf_counter()
    with torch.inference_mode():
        module(m)
    return {"mode": mode, "N": depth, "L": length, "threads": threads, "seconds": time.perf_counter() - start,
            "baseline_mb": baseline, "peak_mb": rss_mb()}


def run_worker(args: list[str], timeout: float) -> dict | None:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        print(f"  {' '.join(args)}: timed out after {timeout:.0f} s", flush=True)
        return None
    if done.returncode != 0:
        print(f"  {' '.join(args)}: failed ({done.returncode}): {done.stderr.strip()[-400:]}", flush=True)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def reused_rows(path: str | None) -> list[dict]:
    """Rows printed by an earlier run (``ROW {json}`` lines, or the ``  {python dict}`` lines of older runs)."""
    if not path:
        return []
    rows = []
    for line in Path(path).read_text().splitlines():
        if line.startswith("ROW "):
            rows.append(json.loads(line[4:]))
        elif line.startswith("  {"):
            rows.append(ast.literal_eval(line.strip()))
    return rows


def summary(inference: list[dict], columns: list[dict], threads: int) -> list[str]:
    """Plain-language findings computed from the rows."""
    out = []
    main_rows = [r for r in inference if r["threads"] == threads]
    if main_rows:
        big = max(main_rows, key=lambda r: (r["L"], r["N"]))
        verdict = "within" if big["peak_mb"] < 16 * 1024 else "above"
        out.append(f"- Largest configuration L = {big['L']}, N = {big['N']}: peak RSS {big['peak_mb'] / 1024:.2f} GB, "
                   f"{verdict} 16 GB ({big['crops']} crops of at most the window; the pair track of one crop "
                   "dominates, the MSA track and the stitch sums add the rest).")
    for mode in ("performer", "plain"):
        rows = sorted((r for r in columns if r["mode"] == mode), key=lambda r: r["N"])
        used = [max(r["peak_mb"] - r["baseline_mb"], 1.0) for r in rows]
        growth = [f"N {a['N']} -> {b['N']}: x{ub / ua:.1f}" for a, b, ua, ub in zip(rows, rows[1:], used, used[1:])]
        if growth:
            step = rows[1]["N"] // rows[0]["N"]
            out.append(f"- Column attention memory, {mode}: {', '.join(growth)} (linear in N: x{step} per step; "
                       f"quadratic: x{step ** 2}).")
    others = [r for r in inference if r["threads"] != threads]
    for row in others:
        base = next((r for r in main_rows if r["L"] == row["L"] and r["N"] == row["N"]), None)
        if base:
            out.append(f"- Threads: L = {row['L']}, N = {row['N']} with {row['threads']} threads took "
                       f"{row['seconds']:.0f} s wall / {row['cpu']:.0f} s CPU against {base['seconds']:.0f} s / "
                       f"{base['cpu']:.0f} s with {threads}: on cores already busy with other jobs torch's OpenMP "
                       "threads spin and wait, so the predict rule runs 1 thread per job.")
    return out


def machine() -> str:
    import torch

    model = platform.processor() or "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    load = os.getloadavg()
    return (f"{model}, {len(os.sched_getaffinity(0))} cores, torch {torch.__version__}, Python "
            f"{platform.python_version()}; load average at start {load[0]:.1f} (machine shared with other jobs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[100, 300, 600, 1000])
    parser.add_argument("--depths", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--window", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--compare-threads", type=int, default=2, help="rerun the first configuration with this")
    parser.add_argument("--column-depths", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--column-length", type=int, default=16,
                        help="columns of the column-attention test (plain attention at N = 4096 needs "
                             "L x 4 x N^2 x 4 bytes of logits: 4.3 GB at L = 16, 17 GB at L = 64)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per configuration")
    parser.add_argument("--reuse", help="output of an earlier run whose rows are kept")
    parser.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        kind, *rest = args.worker
        if kind == "inference":
            out = worker_inference(*(int(x) for x in rest))
        else:
            out = worker_column(rest[0], *(int(x) for x in rest[1:]))
        print(json.dumps(out))
        return

    started = datetime.now().strftime("%Y-%m-%d %H:%M")
    about = machine()
    from workflow_lib.model import ThreeTrackNetwork, count_parameters, preset

    parameters = count_parameters(ThreeTrackNetwork(preset("small", c_coevolution=2)))
    earlier = reused_rows(args.reuse)

    reused: list[dict] = []

    def measure(kind: str, key: dict, worker_args: list[str]) -> dict | None:
        for row in earlier:
            if ("mode" in row) == (kind == "column") and all(
                    (row.get(k, 1) if k == "threads" else row.get(k)) == v for k, v in key.items()):
                reused.append(row)
                return row
        print(f"{kind} {key}", flush=True)
        row = run_worker([kind, *worker_args], args.timeout)
        if row:
            print("ROW " + json.dumps(row), flush=True)
        return row

    inference = []
    plan = [(length, depth, args.threads) for length in args.lengths for depth in args.depths]
    if args.compare_threads and args.compare_threads != args.threads:
        plan.append((args.lengths[0], args.depths[0], args.compare_threads))
    for length, depth, threads in plan:
        row = measure("inference", {"L": length, "N": depth, "threads": threads},
                      [str(length), str(depth), str(args.window), str(threads)])
        if row:
            inference.append({"threads": 1, **row})
    columns = []
    for mode in ("performer", "plain"):
        for depth in args.column_depths:
            row = measure("column", {"mode": mode, "N": depth, "L": args.column_length, "threads": args.threads},
                          [mode, str(depth), str(args.column_length), str(args.threads)])
            if row:
                columns.append(row)

    when = f"on {started}" + (f" ({len(reused)} rows measured by an earlier run, reused with --reuse)" if reused else "")
    lines = [SECTION, "",
             f"Written by `benchmarks/model.py` {when}. Machine: {about}. `small` preset with the "
             f"co-evolution input ({parameters:,} parameters), random weights, window {args.window}, "
             "synthetic protein (random codes, 20% gaps), `max_msa` = N. Peak RSS is the whole worker process "
             "(Python, torch, model, inputs); \"above baseline\" subtracts the RSS just before the forward pass.",
             "For L > window only the first two crops are run: time = crops × mean crop time (extrapolated); peak "
             "memory is that of a full run (the second crop runs on top of the resident full-length stitch sums, "
             "as every later crop of a full run does).", "",
             "Wall seconds suffer from the other jobs on the machine; CPU seconds (user + system of the worker, "
             "≤ threads × wall) are the steadier measure.", "",
             "| L | N | threads | crops | wall s | CPU s | wall s per crop | peak RSS (GB) | above baseline (GB) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in inference:
        mark = " (extrapolated)" if row["extrapolated"] else ""
        lines.append(f"| {row['L']} | {row['N']} | {row['threads']} | {row['crops']} | {row['seconds']:.0f}{mark} | "
                     f"{row['cpu']:.0f}{mark} | {row['crop_seconds']:.1f} | "
                     f"{row['peak_mb'] / 1024:.2f} | {(row['peak_mb'] - row['baseline_mb']) / 1024:.2f} |")
    lines += ["", f"Column attention alone (`ColumnAttention`, c_m = 64, 4 heads, L = {args.column_length} "
              "columns, one forward): memory above baseline (MB) as the MSA depth N grows.", "",
              "| mode | N | seconds | above baseline (MB) |", "|---|---|---|---|"]
    for row in columns:
        lines.append(f"| {row['mode']} | {row['N']} | {row['seconds']:.2f} | "
                     f"{row['peak_mb'] - row['baseline_mb']:.0f} |")
    lines += ["", *summary(inference, columns, args.threads)]
    section = "\n".join(lines) + "\n"
    print(section)
    if not args.no_write:
        from workflow_lib.seqio.atomic import write_text_atomic

        text = RESULTS.read_text() if RESULTS.exists() else "# Benchmarks\n"
        pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
        text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
        write_text_atomic(RESULTS, text)


if __name__ == "__main__":
    main()
