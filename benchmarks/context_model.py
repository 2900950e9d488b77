"""Fit the shipped context-specific pseudocount model (workflow_lib/data/context_pseudocounts.npz).

Training MSAs: trackfold's own MSAs of PDB chains, the first chains of ``pdb_chains_promod3`` in a fixed random
order (seed 0) searched against UniProt-2014 + the Swiss-Prot subsets with ``trackfold msa --iterations 1
--no-sensitive --pseudocounts substitution``: chains of every kind of fold, their homologs from the whole
of UniProt. Queries at least 90% identical over half their length to a sequence of the Pfam, CATH or SCOP
benchmarks are left out (``--exclude-benchmarks``; found with ``trackfold search`` against those sets), so the
benchmarks that judge the search do not judge it on the proteins it learnt from. Rows at most
``--max-identity`` identical to their query; the last 20% of the MSAs (sorted by file name) are held out for
the log-loss report. Writes the weights and a JSON of provenance and log-losses next to them.

    .venv/bin/python benchmarks/context_model.py --msa-dir DIR [--msa-dir DIR ...] [--exclude-benchmarks]
        [--out workflow_lib/data/context_pseudocounts.npz]

Several ``--msa-dir`` are pooled (for example a proteome's MSAs with the PDB chains').
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from workflow_lib.aligner.context import DEFAULT_CONTEXT_MODEL, save_context_model  # noqa: E402
from workflow_lib.aligner.context_train import fit_context_model, read_alignments, training_columns  # noqa: E402
from workflow_lib.seqio.atomic import write_text_atomic  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
EXCLUDE_IDENTITY = 0.9
EXCLUDE_COVERAGE = 0.5


def benchmark_records() -> list[tuple[str, str]]:
    """Every database sequence of the Pfam, CATH and SCOP benchmarks (benchmarks/search_bench/datasets.py)."""
    from search_bench import datasets
    records = []
    for name in ("pfam", "cath", "scop"):
        dataset = datasets.load_scop(SHARED, 600) if name == "scop" else datasets.load(name, SHARED, None)
        records += [(f"{name}|{ident}", sequence) for ident, sequence in dataset.database]
    return records


def query_records(paths: list[Path]) -> list[tuple[str, str]]:
    """Each A3M's first sequence (its query), named by the file."""
    from workflow_lib.seqio.msa import read_a3m
    return [(path.stem, read_a3m(path).rows[0].replace("-", "").upper()) for path in paths]


def benchmark_overlap(paths: list[Path]) -> set[str]:
    """Stems of the A3Ms whose query is at least 90% identical to a benchmark sequence over at least half of
    the longer of the two (one fast trackfold search of the queries against the benchmarks' sequences)."""
    import pandas as pd
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, records in (("bench.fasta", benchmark_records()), ("queries.fasta", query_records(paths))):
            (tmp / name).write_text("".join(f">{ident}\n{seq}\n" for ident, seq in records), encoding="utf-8")
        python = [sys.executable, "-m", "workflow_lib"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run(python + ["db", "build", "--out", str(tmp / "db"), str(tmp / "bench.fasta")], check=True,
                       env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
        subprocess.run(python + ["search", "--db", str(tmp / "db"), "--out", str(tmp / "hits.parquet"),
                                 "--iterations", "1", "--no-sensitive", "--pseudocounts", "substitution",
                                 str(tmp / "queries.fasta")], check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
        hits = pd.read_parquet(tmp / "hits.parquet")
    close = (hits["identity"] >= EXCLUDE_IDENTITY) & \
        (hits["aligned_cols"] >= EXCLUDE_COVERAGE * hits[["qlen", "tlen"]].max(axis=1))
    return set(hits.loc[close, "query"].astype(str))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--msa-dir", type=Path, action="append", required=True,
                        help="directory of training A3Ms (repeatable)")
    parser.add_argument("--out", type=Path, default=DEFAULT_CONTEXT_MODEL)
    parser.add_argument("--exclude-benchmarks", action="store_true",
                        help="leave out MSAs whose query is a Pfam, CATH or SCOP benchmark protein (≥ 90%% "
                             "identity over half its length)")
    parser.add_argument("--half-width", type=int, default=6, help="window = 2h + 1 columns (default 6: 13)")
    parser.add_argument("--max-identity", type=float, default=0.5)
    parser.add_argument("--l2", type=float, default=1e-4)
    args = parser.parse_args(argv)
    paths = sorted((path for folder in args.msa_dir for path in folder.glob("*.a3m")), key=lambda p: p.name)
    if not paths:
        parser.error(f"no .a3m files in {', '.join(map(str, args.msa_dir))}")
    started = time.perf_counter()
    excluded = benchmark_overlap(paths) if args.exclude_benchmarks else set()
    kept = [path for path in paths if path.stem not in excluded]
    columns = training_columns(read_alignments(kept), half_width=args.half_width, max_identity=args.max_identity)
    model, report = fit_context_model(columns, l2=args.l2)
    save_context_model(args.out, model)
    report.update({"msa_files": len(paths), "excluded_as_benchmark_proteins": len(paths) - len(kept),
                   "msas_used": int(len(set(columns.msa.tolist()))),
                   "msa_dirs": [str(d.relative_to(ROOT) if d.is_relative_to(ROOT) else d.name) for d in args.msa_dir],
                   "half_width": args.half_width, "max_identity": args.max_identity, "l2": args.l2,
                   "seconds": round(time.perf_counter() - started, 1)})
    write_text_atomic(args.out.with_suffix(".json"), json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
