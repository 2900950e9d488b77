"""Contacts from the alignment alone: trackfold's direct couplings against the APC covariance and freecontact.

For every chain with an A3M and a structure in a backbone archive: the feature stage's statistics rows and
sequence weights (:func:`workflow_lib.features.msa_features.msa_features`'s sampling and 80%-identity weights),
then per method the long-range (|i − j| ≥ 24) top-L/5 and top-L contact precision against the native's
Cβ-Cβ < 8 Å contacts (virtual Cβ), and the CPU seconds of that method alone (process time; freecontact's
child CPU time, one thread, on the same rows):

- ``apc_cov``: the APC-corrected covariance norm (the feature stage's co-evolution channel 0);
- ``dca_S``: :func:`workflow_lib.features.couplings.coupling_features` at shrinkage S (``auto``: its default, which
  follows the alignment's Neff);
- ``freecontact_P``: Debian's ``freecontact`` with parameter profile P (``evfold``: mean-field DCA;
  ``default``/``psicov``: sparse inverse covariance), when installed.

Results are reported by Neff of the statistics rows (1, 2-10, 10-50, > 50) and over all chains, with the median
CPU seconds.

    python benchmarks/couplings.py --a3m-dir 'MSA_DIR/batch_*' --archive ARCHIVE --chains 200 \\
        --shrinkage auto,10,300 --freecontact evfold --out couplings.json
"""

from __future__ import annotations

import argparse
import glob
import json
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from workflow_lib.evaluate.contacts import long_range_precision, native_contacts
from workflow_lib.features.coevolution import apc, raw_coevolution
from workflow_lib.features.couplings import coupling_features
from workflow_lib.features.msa_features import DEFAULT_MAX_STATS_SEQS, sampling_order, sequence_weights
from workflow_lib.seqio.alphabet import decode
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.structure.backbones import read_backbone_archive
from workflow_lib.structure.cbeta import virtual_cb

NEFF_BINS = ((0, 1.5, "1"), (1.5, 10, "2-10"), (10, 50, "10-50"), (50, np.inf, ">50"))


def statistics_rows(path: Path) -> tuple[np.ndarray, np.ndarray]:
    alignment = read_a3m(path)
    rows = np.arange(alignment.depth)
    if alignment.depth > DEFAULT_MAX_STATS_SEQS:
        rows = np.sort(sampling_order(alignment)[:DEFAULT_MAX_STATS_SEQS])
    codes = np.asarray(alignment.matches)[rows]
    return codes, sequence_weights(codes)


def timed(function, *args, **kwargs):
    began = time.process_time()
    out = function(*args, **kwargs)
    return out, time.process_time() - began


def freecontact_scores(codes: np.ndarray, profile: str, binary: str) -> tuple[np.ndarray | None, float]:
    """freecontact's score matrix (its last output column, APC-corrected) and its CPU seconds (one thread)."""
    length = codes.shape[1]
    text = "".join(decode(row).replace("X", "-") + "\n" for row in codes)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.NamedTemporaryFile("w", suffix=".aln") as handle:
        handle.write(text)
        handle.flush()
        result = subprocess.run([binary, "-a", "1", "--parprof", profile, "-o", "evfold", "-f", handle.name,
                                 "--quiet", "1"],
                                capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if result.returncode != 0:
        return None, seconds
    scores = np.zeros((length, length))
    for line in result.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 6:
            i, j = int(fields[0]) - 1, int(fields[2]) - 1
            scores[i, j] = scores[j, i] = float(fields[-1])
    return scores, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a3m-dir", nargs="+", required=True, help="folders (or globs) of {chain}.a3m")
    parser.add_argument("--archive", type=Path, required=True)
    parser.add_argument("--chains", type=int, default=200)
    parser.add_argument("--min-depth", type=int, default=2, help="skip alignments with fewer rows")
    parser.add_argument("--shrinkage", default="auto", help="comma-separated; auto: the depth-following default")
    parser.add_argument("--max-rows", type=int, default=None, help="couplings' row cap (default: the library's)")
    parser.add_argument("--freecontact", default="evfold", help="profiles, comma-separated ('' for none)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    files = {}
    for pattern in args.a3m_dir:
        for folder in sorted(glob.glob(pattern)):
            for path in sorted(Path(folder).glob("*.a3m")):
                files.setdefault(path.stem, path)
    natives = {b.chain.name.replace(".", "_"): b.chain for b in read_backbone_archive(args.archive,
                                                                                     names=set(files))}
    shrinkages = [None if s == "auto" else float(s) for s in args.shrinkage.split(",") if s]
    binary = shutil.which("freecontact")
    profiles = [p for p in args.freecontact.split(",") if p] if binary else []
    extra = {} if args.max_rows is None else {"max_rows": args.max_rows}
    rows = []
    for name, path in files.items():
        if len(rows) >= args.chains:
            break
        if name not in natives:
            continue
        codes, weights = statistics_rows(path)
        if codes.shape[0] < args.min_depth:
            continue
        chain = natives[name]
        contact, valid = native_contacts(virtual_cb(chain.coords[:, 0], chain.coords[:, 1], chain.coords[:, 2]))
        row = {"chain": name, "length": int(codes.shape[1]), "depth": int(codes.shape[0]),
               "neff": float(weights.sum())}
        (cov, _), seconds = timed(raw_coevolution, codes, weights)
        scores = {"apc_cov": (apc(cov), seconds)}
        for shrinkage in shrinkages:
            features, seconds = timed(coupling_features, codes, weights, shrinkage=shrinkage, **extra)
            scores["dca_auto" if shrinkage is None else f"dca_{shrinkage:g}"] = (features[..., 0], seconds)
        for profile in profiles:
            matrix, seconds = freecontact_scores(codes, profile, binary)
            if matrix is not None:
                scores[f"freecontact_{profile}"] = (matrix, seconds)
        for method, (score, seconds) in scores.items():
            top5, top1 = long_range_precision(score, contact, valid)
            row[f"{method}_p_l5"], row[f"{method}_p_l"], row[f"{method}_cpu_s"] = top5, top1, seconds
        rows.append(row)
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
    methods = [key[:-len("_cpu_s")] for key in rows[0] if key.endswith("_cpu_s")] if rows else []
    summary = {}
    for low, high, label in (*NEFF_BINS, (0, np.inf, "all")):
        chosen = [r for r in rows if low <= r["neff"] < high]
        if not chosen:
            continue
        summary[label] = {"chains": len(chosen), **{
            method: {"p_l5": float(np.nanmean([r[f"{method}_p_l5"] for r in chosen])),
                     "p_l": float(np.nanmean([r[f"{method}_p_l"] for r in chosen])),
                     "cpu_s_median": float(np.median([r[f"{method}_cpu_s"] for r in chosen])),
                     "cpu_s_mean": float(np.mean([r[f"{method}_cpu_s"] for r in chosen]))}
            for method in methods if all(f"{method}_cpu_s" in r for r in chosen)}}
    args.out.write_text(json.dumps({"summary": summary, "chains": rows}, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
