"""The search's Viterbi stages on a GPU against NumPy on the same machine's CPUs, and jackhmmer (pyhmmer) beside
them: one script for a lent GPU machine (the kernels measured run targets in lanes as HH-suite3 does, Steinegger
et al. 2019, BMC Bioinformatics 20:473; the search is HHblits-style, Remmert et al. 2012, Nat. Methods 9:173).

    python benchmarks/device_search.py --shared ../shared/data --out OUT [--queries 250] [--cpus 16]

Steps (each one's numbers are written to ``OUT/device_search.json`` as soon as it ends, so a run cut short
keeps what it measured):

1. ``kernel``: one Pfam query profile against all 1,867 Pfam sequences, score-only and with backtrace, NumPy
   in one process against the torch kernel on the device (GCUPS = query columns × target residues / s); then
   the calibration of ``--queries`` profiles (128 random sequences each): NumPy one profile at a time against
   :func:`workflow_lib.aligner.align_pairs` with every profile's lanes in shared buckets.
2. ``search``: the Pfam benchmark's queries (the deterministic subsample of ``benchmarks/search.py``) against
   all 1,867, 3 iterations, ``--cpus`` processes: ``device=numpy`` and ``device=cuda``; wall and CPU seconds
   (this process and its workers), whether the hits are identical, ROC AUC and pairs found.
3. ``jackhmmer``: pyhmmer's jackhmmer (HMMER 3.4, 3 iterations) on the same queries and database with
   ``--cpus`` threads, when pyhmmer is importable: the CPU-time yardstick measured on the same machine.
4. ``proteome``: the first ``--proteome-queries`` *E. coli* proteins against the Swiss-Prot subsets of the
   proteome-scale benchmark, NumPy, the device and jackhmmer as in steps 2–3.

Kernels on the device: the torch kernel and the fused Triton kernel (lanes per program 32, 64) in step 1;
steps 2 and 4 use the default (Triton on CUDA when installed). ``--pseudocounts context`` runs steps 2 and 4
with context-specific profiles; ``--bucket-timing`` records each device bucket of steps 2 and 4 (lanes, the
longest profile and target, cells, seconds; the 40 slowest in full) under ``device_buckets``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from search_bench import datasets  # noqa: E402
from workflow_lib.aligner import align_pairs, align_targets, profile_from_sequence  # noqa: E402
from workflow_lib.db.build import build_database  # noqa: E402
from workflow_lib.search.engine import DatabaseTotals, calibration_targets  # noqa: E402
from workflow_lib.search.iterative import build_msas  # noqa: E402
from workflow_lib.search.settings import FAST  # noqa: E402
from workflow_lib.seqio.alphabet import encode  # noqa: E402
from workflow_lib.seqio.fasta import Record, safe_name  # noqa: E402


def cpu_seconds() -> float:
    """CPU seconds of this process and of its reaped children (the search's worker processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch
        torch.cuda.synchronize()


def timed(function, device: str, repeats: int = 3) -> tuple[float, object]:
    """Median wall seconds of ``repeats`` calls after one warm-up call, and the last result."""
    result = function()
    synchronize(device)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        synchronize(device)
        times.append(time.perf_counter() - started)
    return float(np.median(times)), result


def machine(device: str) -> dict:
    info = {"cpu": platform.processor() or "", "cores": len(os.sched_getaffinity(0)),
            "python": platform.python_version(), "numpy": np.__version__}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import torch
        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        info["torch"] = None
    try:
        info["nvidia_smi"] = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                                            timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def with_kernel(kernel: str, block: int | None, function):
    """``function()`` with the device kernel ``kernel`` (and Triton's lanes per program ``block``)."""
    from workflow_lib.aligner import triton_kernels
    from workflow_lib.aligner.torch_kernels import KERNEL_VARIABLE
    saved_env, saved_block = os.environ.get(KERNEL_VARIABLE), triton_kernels.BLOCK_LANES
    os.environ[KERNEL_VARIABLE] = kernel
    triton_kernels.BLOCK_LANES = block or saved_block
    try:
        return function()
    finally:
        triton_kernels.BLOCK_LANES = saved_block
        if saved_env is None:
            os.environ.pop(KERNEL_VARIABLE, None)
        else:
            os.environ[KERNEL_VARIABLE] = saved_env


def device_variants(device: str) -> list[tuple[str, str, int | None]]:
    """(label, kernel, Triton block) of every device kernel to time."""
    variants = [("torch", "torch", None)]
    if device.startswith("cuda") or os.environ.get("TRITON_INTERPRET") == "1":
        variants += [(f"triton_b{block}", "triton", block) for block in (32, 64)]  # 128 was slower on an H200
    return variants


def kernel_step(dataset: datasets.Dataset, device: str, queries: int, targets: int | None) -> dict:
    database = [encode(seq) for _, seq in dataset.database][:targets]
    lengths = [len(seq) for _, seq in dataset.queries]
    name, sequence = dataset.queries[int(np.argsort(lengths)[len(lengths) // 2])]
    profile = profile_from_sequence(sequence)
    cells = profile.length * sum(t.size for t in database)
    out = {"query": name, "query_length": profile.length, "targets": len(database), "cells": cells}
    for backtrace in (False, True):
        key = "backtrace" if backtrace else "score_only"
        numpy_s, numpy_hits = timed(lambda: align_targets(profile, database, backtrace=backtrace, device="numpy"),
                                    "cpu", repeats=1)
        expected = [(h.raw_score, h.states) for h in numpy_hits]
        out[key] = {"numpy_s": numpy_s, "numpy_gcups": cells / numpy_s / 1e9}
        for label, kernel, block in device_variants(device):
            seconds, hits = with_kernel(kernel, block, lambda: timed(
                lambda: align_pairs([profile], np.zeros(len(database), np.int64), database, backtrace=backtrace,
                                    device=device), device))
            out[key][label] = {"s": seconds, "gcups": cells / seconds / 1e9,
                               "identical": [(h.raw_score, h.states) for h in hits] == expected}
        print(f"kernel {key}: {json.dumps(out[key], default=float)}", flush=True)
    # calibration of many profiles: one call per profile (NumPy) against shared buckets (device)
    totals = DatabaseTotals("pfam", len(database), sum(t.size for t in database))
    profiles = [profile_from_sequence(seq) for _, seq in dataset.queries[:queries]]
    target_sets = [calibration_targets(p, totals) for p in profiles]
    pair_profile = np.repeat(np.arange(len(profiles)), [len(t) for t in target_sets])
    flat = [t for ts in target_sets for t in ts]
    cal_cells = sum(p.length * sum(t.size for t in ts) for p, ts in zip(profiles, target_sets))
    sample = min(len(profiles), 20)
    started = time.perf_counter()
    numpy_scores = [[h.raw_score for h in align_targets(p, ts, device="numpy")]
                    for p, ts in zip(profiles[:sample], target_sets[:sample])]
    numpy_s = (time.perf_counter() - started) * len(profiles) / sample
    bounds = np.cumsum([0] + [len(t) for t in target_sets])
    calibration = {"profiles": len(profiles), "pairs": len(flat), "cells": cal_cells,
                   "numpy_s_estimated": numpy_s, "numpy_profiles_timed": sample}
    for label, kernel, block in device_variants(device):
        seconds, hits = with_kernel(kernel, block, lambda: timed(
            lambda: align_pairs(profiles, pair_profile, flat, device=device), device, repeats=2))
        same = all([h.raw_score for h in hits[bounds[k]:bounds[k + 1]]] == numpy_scores[k] for k in range(sample))
        calibration[label] = {"s": seconds, "gcups": cal_cells / seconds / 1e9, "identical": same}
    out["calibration"] = calibration
    return out


class BucketTimer:
    """Records every mixed-profile bucket the device runs (``align_pairs`` → ``align_mixed_batch_torch``, in
    this process): lanes, the longest profile and target, real and padded cells, and seconds (the call ends
    with the results on the host)."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    def __enter__(self):
        from workflow_lib.aligner import lanes
        self.lanes_module, self.original = lanes, lanes.align_mixed_batch_torch

        def timed_bucket(scores_list, pair_profile, targets, indices, *, backtrace, device):
            query = [scores_list[int(pair_profile[k])].length for k in indices]
            target = [int(targets[k].size) for k in indices]
            started = time.perf_counter()
            hits = self.original(scores_list, pair_profile, targets, indices, backtrace=backtrace, device=device)
            self.rows.append({"lanes": len(indices), "max_query": max(query), "max_target": max(target),
                              "cells": int(np.dot(query, target)), "padded_cells": len(indices) * max(query)
                              * max(target), "backtrace": bool(backtrace), "s": time.perf_counter() - started})
            return hits

        lanes.align_mixed_batch_torch = timed_bucket
        return self

    def __exit__(self, *exc) -> None:
        self.lanes_module.align_mixed_batch_torch = self.original

    def summary(self) -> dict:
        if not self.rows:
            return {"buckets": 0}
        rows = sorted(self.rows, key=lambda r: -r["s"])
        seconds, cells = sum(r["s"] for r in rows), sum(r["cells"] for r in rows)
        return {"buckets": len(rows), "s": seconds, "cells": cells, "gcups": cells / seconds / 1e9,
                "padded_fraction": 1 - cells / max(sum(r["padded_cells"] for r in rows), 1),
                "lanes_median": float(np.median([r["lanes"] for r in rows])),
                "slowest": rows[:40]}


def search_runs(records: list[Record], db: Path, device: str, cpus: int, iterations: int,
                dataset: datasets.Dataset | None = None, pseudocounts: str = "substitution",
                bucket_timing: bool = False) -> dict:
    """``build_msas`` of ``records`` on ``db`` with NumPy and on ``device``: times, hits, whether identical;
    with ``bucket_timing`` also the device's buckets (:class:`BucketTimer`, which adds a little host time)."""
    import contextlib

    import pandas as pd
    out = {"queries": len(records), "cpus": cpus, "iterations": iterations}
    tables = {}
    for backend in ("numpy", device):  # the device with its default kernel (Triton on CUDA when installed)
        timer = BucketTimer() if bucket_timing and backend != "numpy" else None
        cpu0, wall0 = cpu_seconds(), time.perf_counter()
        with timer or contextlib.nullcontext():
            settings = FAST.replace(iterations=iterations, pseudocounts=pseudocounts)  # the fast prefilter
            results = build_msas(records, db, settings.search, settings.msa, cpus=cpus, device=backend)
        synchronize(backend)
        wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
        frames = [it.hits for r in results for it in r.iterations if not it.hits.empty]
        hits = pd.concat(frames, ignore_index=True)
        tables[backend] = hits
        out[backend] = {"wall_s": wall, "cpu_s": cpu, "cpu_s_per_query": cpu / len(records),
                        "wall_s_per_query": wall / len(records), "hits": len(hits),
                        "iterations_run": int(sum(len(r.iterations) for r in results)),
                        "msa_rows": int(sum(len(r.alignment.rows) for r in results))}
        if timer is not None:
            out[backend]["device_buckets"] = timer.summary()
        if dataset is not None:
            metrics = datasets.pfam_metrics(dataset, hits)
            out[backend].update(roc_auc=metrics["roc_auc"], sens_at_1pct_fpr=metrics["sens_at_1pct_fpr"],
                                positives_found=metrics["positives_found"])
        print(f"search {db.name} {backend}: {wall:.1f} s wall, {cpu:.1f} CPU s, {len(hits)} hits", flush=True)
    columns = ["query", "target", "evalue", "bitscore", "qstart", "qend", "tstart", "tend", "alignment",
               "iteration"]
    out["identical"] = bool(tables["numpy"][columns].reset_index(drop=True).equals(
        tables[device][columns].reset_index(drop=True)))
    return out


def search_step(dataset: datasets.Dataset, device: str, cpus: int, work: Path, iterations: int,
                pseudocounts: str, bucket_timing: bool = False) -> dict:
    db_fasta = work / "pfam.fasta"
    db_fasta.write_text("".join(f">{name}\n{seq}\n" for name, seq in dataset.database))
    build_database([db_fasta], work / "pfam_db", shards=1)
    records = [Record(name, "", seq, safe_name(name)) for name, seq in dataset.queries]
    return search_runs(records, work / "pfam_db", device, cpus, iterations, dataset, pseudocounts, bucket_timing)


PROTEOME_DATABASE = ("genus_Enterococcus", "genus_Staphylococcus", "sprot_Archaea", "sprot_Mitochondria",
                     "sprot_Viruses")
"""The Swiss-Prot subsets of the proteome-scale benchmark (``benchmarks/proteome``: all but genus_Escherichia)."""


def proteome_step(shared: Path, device: str, cpus: int, work: Path, iterations: int, count: int,
                  pseudocounts: str, bucket_timing: bool = False) -> dict:
    """The first ``count`` E. coli proteins against the Swiss-Prot subsets; also jackhmmer on the same."""
    from workflow_lib.seqio.fasta import read_fasta
    fastas = [shared / "swissprot_subsets_prokka" / f"{name}.fasta.gz" for name in PROTEOME_DATABASE]
    build_database(fastas, work / "sprot_db", shards=1)
    records = read_fasta(shared / "proteome_ecoli_k12" / "UP000000625_83333.fasta.gz")[:count]
    out = search_runs(records, work / "sprot_db", device, cpus, iterations, pseudocounts=pseudocounts,
                      bucket_timing=bucket_timing)
    database = [(r.id, r.sequence) for path in fastas for r in read_fasta(path)]
    out["database_sequences"] = len(database)
    proteome = datasets.Dataset("ecoli", [(r.id, r.sequence) for r in records], database)
    out["jackhmmer"] = jackhmmer_step(proteome, cpus, iterations, metrics=False)
    return out


def jackhmmer_step(dataset: datasets.Dataset, cpus: int, iterations: int, metrics: bool = True) -> dict:
    import pandas as pd
    import pyhmmer
    alphabet = pyhmmer.easel.Alphabet.amino()
    targets = [pyhmmer.easel.TextSequence(name=n.encode(), sequence=s).digitize(alphabet)
               for n, s in dataset.database]
    block = pyhmmer.easel.DigitalSequenceBlock(alphabet, targets)
    queries = [pyhmmer.easel.TextSequence(name=n.encode(), sequence=s).digitize(alphabet)
               for n, s in dataset.queries]
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    rows = []
    # results come in query order (the HMM is named QUERY-iN)
    for (name, _), result in zip(dataset.queries, pyhmmer.hmmer.jackhmmer(queries, block, max_iterations=iterations,
                                                                          cpus=cpus)):
        for hit in result.hits:
            target = hit.name.decode() if isinstance(hit.name, bytes) else str(hit.name)
            rows.append((name, target, float(hit.evalue)))
    wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
    hits = pd.DataFrame(rows, columns=["query", "target", "evalue"])
    out = {"version": pyhmmer.__version__, "wall_s": wall, "cpu_s": cpu, "cpu_s_per_query": cpu / len(queries),
           "hits": len(hits)}
    if metrics:
        scored = datasets.pfam_metrics(dataset, hits)
        out.update(roc_auc=scored["roc_auc"], sens_at_1pct_fpr=scored["sens_at_1pct_fpr"],
                   positives_found=scored["positives_found"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, required=True, help="device_search.json goes here")
    parser.add_argument("--work", type=Path, default=None, help="database and scratch files (default OUT/work)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--queries", type=int, default=250)
    parser.add_argument("--cpus", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--steps", default="kernel,proteome,search,jackhmmer",
                        help="comma-separated, run in this order (default: the proteome set, still unmeasured "
                             "with the device traceback, before the Pfam search)")
    parser.add_argument("--proteome-queries", type=int, default=200)
    parser.add_argument("--pseudocounts", choices=("substitution", "context"), default="substitution",
                        help="the searches' pseudocounts (context: calibrated on reversed proteins, as the CLI's "
                             "auto does)")
    parser.add_argument("--bucket-timing", action="store_true",
                        help="record every device bucket of the searches (lanes, lengths, cells, seconds)")
    parser.add_argument("--kernel-targets", type=int, default=None,
                        help="kernel step: the first N database sequences only (a quick check)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or args.out / "work"
    work.mkdir(parents=True, exist_ok=True)
    dataset = datasets.load_pfam(args.shared, subsample=args.queries)
    report = {"machine": machine(args.device), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
              "pseudocounts": args.pseudocounts}
    path = args.out / "device_search.json"
    steps = {"kernel": lambda: kernel_step(dataset, args.device, args.queries, args.kernel_targets),
             "search": lambda: search_step(dataset, args.device, args.cpus, work, args.iterations,
                                           args.pseudocounts, args.bucket_timing),
             "jackhmmer": lambda: jackhmmer_step(dataset, args.cpus, args.iterations),
             "proteome": lambda: proteome_step(args.shared, args.device, args.cpus, work, args.iterations,
                                               args.proteome_queries, args.pseudocounts, args.bucket_timing)}
    for step in args.steps.split(","):
        started = time.perf_counter()
        try:
            report[step] = steps[step]()
        except Exception as error:  # noqa: BLE001 - one failed step must not lose the others' numbers
            report[step] = {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
            print(report[step]["traceback"], file=sys.stderr, flush=True)
        report[step]["step_s"] = time.perf_counter() - started
        path.write_text(json.dumps(report, indent=1, default=float))
        print(f"[{step}] {json.dumps(report[step], default=float)[:1500]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
