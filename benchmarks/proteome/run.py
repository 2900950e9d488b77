"""Proteome-scale run of the MSA stage through Snakemake (the proteome-scale benchmark).

E. coli K-12 (UP000000625, 4,352 proteins) against the Swiss-Prot subsets without genus_Escherichia, with the
workflow's own rules (db_build → chunks → search_shard × shards × iterations → msa_merge → msa_final), on the
cores given. ``--proteins N`` takes every k-th protein (deterministic) so a run fits in the time at hand; the
report states N. Prints a Markdown table: wall time, proteins per hour, peak memory per job (from the rules'
``benchmark:`` files) and MSA statistics.

A run may be stopped and started again (Ctrl-C, a lost connection): the next call with the same ``--proteins``
resumes where Snakemake left off (finished jobs are kept, interrupted ones rerun) and the reported wall time is
the sum of the segments, each appended to ``segments.tsv``. ``--fresh`` starts over.

Resuming across calls: the database FASTAs are staged into ``_work/proteome/inputs/`` once (timestamps kept,
content checked against ../shared on every call), because a new mount of ../shared gives its files new
timestamps and Snakemake would then rebuild the database and redo every finished job. Snakemake runs with
``--rerun-triggers mtime``, so only missing, incomplete or out-of-date files are made; instead of its code and
parameter triggers, ``run.json`` records the workflow code (git tree of ``Snakefile``, ``rules/``,
``workflow_lib/``) and the config of the first segment, and a later segment with other code or config is refused
(use ``--fresh``): one run measures one version. Segments that ended before the database manifest was last
written are not counted (their work was redone), and the report says so.

    .venv/bin/python benchmarks/proteome/run.py --proteins 200 --cores 2
    .venv/bin/python benchmarks/proteome/run.py --cores 2          # the whole proteome, resumable
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "benchmarks" / "_work" / "proteome"
SOURCE = ROOT.parent / "shared" / "data" / "proteome_ecoli_k12" / "UP000000625_83333.fasta.gz"

sys.path.insert(0, str(ROOT))
from workflow_lib.seqio.atomic import write_text_atomic  # noqa: E402
from workflow_lib.seqio.fasta import read_fasta, write_fasta  # noqa: E402

HEARTBEAT_S = 30
CONFIG = ROOT / "benchmarks" / "proteome" / "config.yaml"
STAGED = WORK / "inputs"
DATABASE_SOURCE = ROOT.parent / "shared" / "data" / "swissprot_subsets_prokka"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stage_inputs() -> None:
    """Copy the database FASTAs the config lists under ``STAGED`` from ``DATABASE_SOURCE`` once (timestamps
    kept); later calls check their content."""
    config = yaml.safe_load(CONFIG.read_text())
    STAGED.mkdir(parents=True, exist_ok=True)
    for listed in (path for database in config["databases"].values() for path in database["fasta"]):
        staged = ROOT / listed
        if staged.parent != STAGED:
            raise SystemExit(f"{CONFIG}: database input {listed} is not under {STAGED.relative_to(ROOT)}")
        source = DATABASE_SOURCE / staged.name
        if not source.exists():
            raise SystemExit(f"{source}: database input missing (needs ../shared/data)")
        if staged.exists():
            if sha256(staged) != sha256(source):
                raise SystemExit(f"{staged} differs from {source}; use --fresh")
            continue
        partial = staged.with_name(staged.name + ".partial")
        shutil.copy2(source, partial)
        partial.replace(staged)


def workflow_version(proteins: int) -> dict[str, str | int]:
    """Git trees of the workflow code and the config's hash (what a resumed segment must share)."""
    def tree(path: str) -> str:
        return subprocess.run(["git", "rev-parse", f"HEAD:{path}"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "Snakefile", "rules", "workflow_lib"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.strip()
    if dirty:
        raise SystemExit(f"uncommitted workflow code changes; commit them first:\n{dirty}")
    return {"Snakefile": tree("Snakefile"), "rules": tree("rules"), "workflow_lib": tree("workflow_lib"),
            "config_sha256": sha256(CONFIG), "proteins": proteins}


def check_version(path: Path, proteins: int) -> None:
    """Record the version of the first segment; refuse to resume with another one."""
    version = workflow_version(proteins)
    if path.exists():
        recorded = json.loads(path.read_text())
        changed = sorted(key for key in version if recorded.get(key) != version[key])
        if changed:
            raise SystemExit(f"{path}: this run was started with other {', '.join(changed)}; "
                             "use --fresh to start over with the current version")
        return
    write_text_atomic(path, json.dumps(version, indent=1) + "\n")


def counted_segments(segments: Path, results: Path) -> pd.DataFrame:
    """The segments that count: those ending after the database manifest was last written (earlier work was
    redone when the database was rebuilt); prints what it leaves out."""
    frame = pd.read_csv(segments, sep="\t", header=None, names=["end", "wall_s", "state"])
    manifests = glob.glob(str(results / "db" / "*" / "manifest.json"))
    if not manifests:
        return frame
    built = pd.Timestamp(time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(max(Path(m).stat().st_mtime
                                                                                for m in manifests))))
    keep = pd.to_datetime(frame["end"]) >= built
    if not keep.all():
        dropped = frame[~keep]
        print(f"not counted: {len(dropped)} segment(s), {dropped['wall_s'].sum():.0f} s, that ended before the "
              f"database was rebuilt at {built} (their jobs were redone)")
    return frame[keep]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--proteins", type=int, default=0, help="every k-th protein, N in all (0 = all)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--fresh", action="store_true", help="delete earlier results and segments first")
    args = parser.parse_args()
    records = read_fasta(SOURCE)
    if args.proteins and args.proteins < len(records):
        step = len(records) / args.proteins
        records = [records[int(k * step)] for k in range(args.proteins)]
    results = WORK / "results"
    segments = WORK / "segments.tsv"
    fasta = WORK / "ecoli.fasta"
    if args.fresh:
        shutil.rmtree(results, ignore_errors=True)
        segments.unlink(missing_ok=True)
        (WORK / "run.json").unlink(missing_ok=True)
        fasta.unlink(missing_ok=True)
    WORK.mkdir(parents=True, exist_ok=True)
    entries = [(f"{r.id} {r.description}".strip(), r.sequence) for r in records]
    if fasta.exists() and [(r.id, r.sequence) for r in read_fasta(fasta)] != [(r.id, r.sequence) for r in records]:
        raise SystemExit(f"{fasta} holds another protein set than --proteins {args.proteins}; use --fresh")
    if not fasta.exists():
        write_fasta(fasta, entries)   # rewritten only when absent: a newer FASTA would rerun every job
    stage_inputs()
    check_version(WORK / "run.json", args.proteins)
    started = time.time()
    command = [str(ROOT / ".venv" / "bin" / "snakemake"), "--cores", str(args.cores), "--configfile",
               str(CONFIG), "--replace-workflow-config", "--nolock", "--rerun-incomplete",
               "--rerun-triggers", "mtime", "--until", "msa_final", "--quiet", "rules"]
    earlier = segments.read_text() if segments.exists() else ""
    process = subprocess.Popen(command, cwd=ROOT)
    finished = None
    while finished is None:   # the segment's time is rewritten every HEARTBEAT_S, so a killed run keeps it
        try:
            finished = process.wait(timeout=HEARTBEAT_S)
        except subprocess.TimeoutExpired:
            pass
        state = "running" if finished is None else str(finished)
        write_text_atomic(segments, earlier + f"{time.strftime('%Y-%m-%dT%H:%M:%S')}\t"
                                              f"{time.time() - started:.1f}\t{state}\n")
    if finished != 0:
        print(f"snakemake exited with {finished}; run again to resume (segments so far: {segments})")
        return finished
    segment_walls = counted_segments(segments, results)
    wall = float(segment_walls["wall_s"].sum())
    stats = pd.concat([pd.read_parquet(p) for p in glob.glob(str(results / "ecoli" / "msa" / "*.stats.parquet"))])
    rows = []
    for path in glob.glob(str(results / "benchmarks" / "*" / "**" / "*.tsv"), recursive=True):
        frame = pd.read_csv(path, sep="\t")
        rows.append({"rule": Path(path).relative_to(results / "benchmarks").parts[0], "s": frame["s"].iloc[0],
                     "max_rss": frame["max_rss"].iloc[0]})
    jobs = pd.DataFrame(rows)
    summary = jobs.groupby("rule").agg(jobs=("s", "size"), total_s=("s", "sum"), max_s=("s", "max"),
                                       peak_rss_mb=("max_rss", "max"))
    print(f"proteins: {len(records)}  wall: {wall:.0f} s in {len(segment_walls)} counted segment(s)  "
          f"proteins/hour: {3600 * len(records) / wall:.0f}")
    print(summary.to_markdown() if hasattr(summary, "to_markdown") else summary.to_string())
    print(stats[["depth", "neff", "coverage", "iterations", "seconds"]].describe().round(2).to_string())
    (WORK / "summary.txt").write_text(f"proteins {len(records)} wall_s {wall:.1f} segments {len(segment_walls)}\n"
                                      f"{summary.to_string()}\n"
                                      f"{stats.describe().to_string()}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
