"""CPU of Snakemake's own process over a run of many jobs, for two settings of its job rate limiter.

    python benchmarks/snakemake_overhead.py [--jobs 300] [--seconds 1] [--cores 2]
        [--settings 100/1s,500/5s]

Writes a Snakefile of ``--jobs`` independent jobs that each sleep ``--seconds`` (no CPU of their own) into a
temporary folder and runs ``snakemake --cores C --max-jobs-per-timespan S`` there once per setting, one after the
other, with ``--workflow-profile none``. Snakemake's CPU is its own process's user + system time (read from /proc
while it runs; the jobs' shells and ``sleep`` processes are not counted). ``100/1s`` is Snakemake's default;
``500/5s`` is what this workflow's ``profiles/default`` sets.

Snakemake 9 re-runs its scheduling loop once per timespan for every job finished so far (each finish starts one
more timer chain), so its CPU grows with the jobs finished and falls with the timespan; at exit it waits for its
last timer, up to one timespan.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SNAKEFILE = """\
rule all:
    input: expand("done/{{i}}.txt", i=range({jobs}))

rule one:
    output: "done/{{i}}.txt"
    shell: "sleep {seconds} && echo {{wildcards.i}} > {{output}}"
"""


def own_cpu(pid: int) -> float | None:
    """User + system seconds of process ``pid`` itself (not its children), from /proc; None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(setting: str, jobs: int, seconds: float, cores: int) -> dict:
    """Snakemake's own CPU seconds (its last reading in /proc, every 0.2 s) and the run's wall seconds."""
    with tempfile.TemporaryDirectory() as work:
        Path(work, "Snakefile").write_text(SNAKEFILE.format(jobs=jobs, seconds=seconds))
        command = [str(Path(sys.executable).with_name("snakemake")), "--cores", str(cores), "--quiet", "all",
                   "--workflow-profile", "none", "--max-jobs-per-timespan", setting]
        began = time.perf_counter()
        process = subprocess.Popen(command, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        last = 0.0
        while process.poll() is None:
            reading = own_cpu(process.pid)
            last = reading if reading is not None else last
            time.sleep(0.2)
        wall = time.perf_counter() - began
        if process.returncode:
            raise SystemExit(f"snakemake_overhead: snakemake failed ({setting}): {process.stderr.read().decode()}")
    return {"setting": setting, "self_s": last, "wall_s": wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--settings", default="100/1s,500/5s")
    args = parser.parse_args()
    rows = [run(setting, args.jobs, args.seconds, args.cores) for setting in args.settings.split(",")]
    print(f"{args.jobs} jobs of `sleep {args.seconds:g}` on --cores {args.cores}, one run per setting, in order\n")
    print("| --max-jobs-per-timespan | Snakemake's CPU s | wall s | CPU per wall second |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['setting']} | {row['self_s']:.1f} | {row['wall_s']:.0f} | "
              f"{row['self_s'] / row['wall_s']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
