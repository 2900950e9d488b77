"""Viterbi kernel throughput: our sequence–profile lanes vs HMMER3 on the same profile and targets.

    .venv/bin/python benchmarks/viterbi.py [--targets 400] [--max-targets 40] [--no-write]

Query: ``hmmbuild`` of shared/data/hmmer_examples/tutorial/Pkinase.sto, read into our Profile with
:func:`workflow_lib.aligner.hmmer3.read_hmmer3`. Targets: the first N Swiss-Prot sequences of
shared/data/swissprot_subsets_prokka/*.fasta.gz (file order, sorted names). GCUPS = query length × target residues
/ wall seconds. HMMER: ``hmmsearch --F1 1.0 --F2 1e-30 --F3 1e-30 --cpu 1`` (every target through the MSV and the
SIMD Viterbi filter, almost nothing further) and ``hmmsearch --max --cpu 1`` (generic Forward/Backward on
every target; run on the first ``--max-targets`` only, GCUPS is per cell). Appends/replaces the section
"Viterbi kernel" of benchmarks/RESULTS.md and ends with the line
``per-core GCUPS ours=X hmmer_viterbi_filter=Y ratio=Z``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workflow_lib.aligner import align_targets  # noqa: E402
from workflow_lib.aligner.hmmer3 import read_hmmer3  # noqa: E402
from workflow_lib.aligner.lanes import LANE_CELLS, resolve_cpus  # noqa: E402
from workflow_lib.seqio.alphabet import encode  # noqa: E402
from workflow_lib.seqio.atomic import write_text_atomic  # noqa: E402
from workflow_lib.seqio.fasta import iter_fasta  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
WORK = ROOT / "benchmarks" / "_work"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## Viterbi kernel"


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{model}, {resolve_cpus(0)} cores available to the process, Python {platform.python_version()}, "
            f"NumPy {np.__version__}, {platform.system()} {platform.release()}")


def load_targets(count: int) -> tuple[list[str], list[str]]:
    names, sequences = [], []
    for path in sorted((SHARED / "swissprot_subsets_prokka").glob("*.fasta.gz")):
        for record in iter_fasta(path, allow_duplicates=True):
            names.append(f"t{len(names)}")
            sequences.append(record.sequence)
            if len(names) == count:
                return names, sequences
    return names, sequences


def timed(function, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return time.perf_counter() - start, result


def run_hmmsearch(hmm: Path, fasta: Path, options: list[str]) -> float:
    command = ["hmmsearch", *options, "--cpu", "1", "--noali", "-o", os.devnull, str(hmm), str(fasta)]
    seconds, _ = timed(subprocess.run, command, check=True)
    return seconds


def profile_breakdown(profile, targets) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    align_targets(profile, targets, backtrace=False, cpus=1)
    profiler.disable()
    stream = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream).sort_stats("tottime")
    total = sum(row[2] for row in stats.stats.values())
    rows = sorted(((row[2], func) for func, row in stats.stats.items()), reverse=True)[:5]
    out = []
    for seconds, (filename, line, name) in rows:
        where = f"{Path(filename).name}:{line}({name})" if filename != "~" else name
        out.append(f"| `{where}` | {seconds:.2f} | {100 * seconds / total:.0f}% |")
    return "\n".join(out)


def dtype_micro() -> str:
    """ns per element of the kernel's basic operations on one lane row (Lt=300, W=256)."""
    rows = []
    rng = np.random.default_rng(0)
    for dtype in (np.int16, np.int32, np.float32):
        a = rng.integers(-1000, 1000, (301, 256)).astype(dtype)
        out = np.empty((300, 256), dtype)
        timings = {}
        for label, op in (("add", lambda: np.add(a[:-1], a[1:], out=out)),
                          ("maximum", lambda: np.maximum(a[:-1], a[1:], out=out)),
                          ("accumulate", lambda: np.maximum.accumulate(a[1:], axis=0, out=out))):
            op()
            start = time.perf_counter()
            for _ in range(100):
                op()
            timings[label] = (time.perf_counter() - start) / 100 / out.size * 1e9
        rows.append(f"| {np.dtype(dtype).name} | {timings['add']:.2f} | {timings['maximum']:.2f} | "
                    f"{timings['accumulate']:.2f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=3000)
    parser.add_argument("--max-targets", type=int, default=300)
    parser.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    args = parser.parse_args()
    for tool in ("hmmbuild", "hmmsearch"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found (HMMER3 is needed for the comparison)")
    WORK.mkdir(parents=True, exist_ok=True)
    hmm = WORK / "Pkinase.hmm"
    subprocess.run(["hmmbuild", "--amino", str(hmm), str(SHARED / "hmmer_examples" / "tutorial" / "Pkinase.sto")],
                   check=True, stdout=subprocess.DEVNULL)
    profile = read_hmmer3(hmm)
    names, sequences = load_targets(args.targets)
    fasta = WORK / "targets.fasta"
    fasta.write_text("".join(f">{n}\n{s}\n" for n, s in zip(names, sequences)))
    small = WORK / "targets_small.fasta"
    small.write_text("".join(f">{n}\n{s}\n" for n, s in zip(names[:args.max_targets], sequences[:args.max_targets])))
    targets = [encode(s) for s in sequences]
    residues = sum(len(s) for s in sequences)
    cells = profile.length * residues
    small_cells = profile.length * sum(len(s) for s in sequences[:args.max_targets])
    cores = resolve_cpus(0)
    print(f"query Pkinase M={profile.length}; {len(targets)} targets, {residues} residues; {cores} cores")

    results = {}
    align_targets(profile, targets[:20], cpus=1)  # warm-up
    for label, backtrace, cpus in (("ours, 1 process", False, 1), ("ours, 1 process, backtrace", True, 1),
                                   (f"ours, {cores} processes", False, cores),
                                   (f"ours, {cores} processes, backtrace", True, cores)):
        seconds, _ = timed(align_targets, profile, targets, backtrace=backtrace, cpus=cpus)
        results[label] = (seconds, cells / seconds / 1e9, cpus)
        print(f"{label:40s} {seconds:8.2f} s {cells / seconds / 1e9:7.3f} GCUPS")
    seconds = run_hmmsearch(hmm, fasta, ["--F1", "1.0", "--F2", "1e-30", "--F3", "1e-30"])
    results["hmmsearch --F1 1.0 --F2 1e-30 --F3 1e-30 --cpu 1 (MSV + SIMD Viterbi filter)"] = (
        seconds, cells / seconds / 1e9, 1)
    hmmer_filter = cells / seconds / 1e9
    print(f"{'hmmsearch Viterbi filter':40s} {seconds:8.2f} s {hmmer_filter:7.3f} GCUPS")
    seconds = run_hmmsearch(hmm, small, ["--max"])
    results[f"hmmsearch --max --cpu 1 (Forward/Backward, first {args.max_targets} targets)"] = (
        seconds, small_cells / seconds / 1e9, 1)
    print(f"{'hmmsearch --max':40s} {seconds:8.2f} s {small_cells / seconds / 1e9:7.3f} GCUPS")

    sweep = []
    subset = targets[:max(60, len(targets) // 4)]
    subset_cells = profile.length * sum(len(t) for t in subset)
    for lane_cells in (16 * 1024, 32 * 1024, 64 * 1024, 80 * 1024, 128 * 1024, 256 * 1024):
        seconds, _ = timed(align_targets, profile, subset, cpus=1, lane_cells=lane_cells)
        sweep.append(f"| {lane_cells // 1024}k | {subset_cells / seconds / 1e9:.3f} |")
    breakdown = profile_breakdown(profile, subset)
    micro = dtype_micro()

    ours_per_core = results["ours, 1 process"][1]
    ratio = ours_per_core / hmmer_filter
    table = "\n".join(f"| {label} | {cpus} | {seconds:.2f} | {gcups:.3f} | {gcups / cpus:.3f} |"
                      for label, (seconds, gcups, cpus) in results.items())
    section = f"""{SECTION}

Written by `benchmarks/viterbi.py` on {time.strftime('%Y-%m-%d %H:%M')}. Machine: {machine()}.
Query: Pkinase (`hmmbuild` of the HMMER tutorial's Pkinase.sto), M = {profile.length} match states. Targets: the
first {len(targets)} sequences of `swissprot_subsets_prokka/*.fasta.gz` ({residues} residues). GCUPS = M × target
residues / wall-clock seconds (our timings include bucketing, process start-up and, with backtrace, the
alignments; HMMER's include reading the files). All rows come from one run; on a shared machine numbers vary
by about ±20% between runs, so compare ratios within one run.

| run | processes | seconds | GCUPS | GCUPS per process |
|---|---|---|---|---|
{table}

**Per-core ratio ours / HMMER Viterbi filter: {ratio:.3f}** (ours {ours_per_core:.3f} GCUPS, HMMER
{hmmer_filter:.3f}). HMMER's filter runs striped int16 SIMD code (8-16 cells per instruction); our kernel runs
one NumPy call per operation over a whole row of all lanes (about 12 array passes per cell, int32).

Lane width (cells per DP row, `lane_cells`; 1 process, {len(subset)} targets):

| lane_cells | GCUPS |
|---|---|
{chr(10).join(sweep)}

Where the time goes (cProfile, 1 process, no backtrace; `tottime` of the top functions: the kernel's loop body
is the NumPy calls made directly in `viterbi_seq_lanes`, the in-row I scan is `prefix_max`, the emission gather
is `take`, the per-row best is `reduce`):

| function | seconds | share |
|---|---|---|
{breakdown}

dtype choice: ns per element for one lane row (300 × 256) of the kernel's basic operations. int16 halves the
cost of the elementwise passes, but the in-row scan (the largest single cost) is a scalar loop in every dtype,
and int16 cannot hold the shifted scan values (l·t.II reaches 10^7 milli-bits) or full-length scores without
saturation tricks and a coarse scale; float32 is no faster and loses the low bits of the shifted scan. So the
kernel uses int32 milli-bits, exact against the reference.

| dtype | add | maximum | maximum.accumulate (axis 0) |
|---|---|---|---|
{micro}

Design notes: rows are query columns, lanes × target positions are the vector; the M->M transition is folded
into the gathered emission row; I and D are kept in shifted form (I − l·t.II, D − t.MD) so the shifts fold into
the next row's constants; `np.maximum.accumulate` along the position axis is a scalar loop (~2.4 ns/cell), so the
in-row I chain uses a blocked scan (`prefix_max`: √Lt strided maxima, a carry over block ends, one broadcast
maximum; ~1 ns/cell at 256 lanes).
"""
    if not args.no_write:
        text = RESULTS.read_text() if RESULTS.exists() else "# Benchmarks\n"
        pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
        text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
        write_text_atomic(RESULTS, text)
    print(f"per-core GCUPS ours={ours_per_core:.3f} hmmer_viterbi_filter={hmmer_filter:.3f} ratio={ratio:.3f}")


if __name__ == "__main__":
    main()
