"""Fit the shipped context-specific pseudocount model (workflow_lib/data/context_pseudocounts.npz).

Training MSAs: trackfold's own MSAs of a proteome (by default the whole *E. coli* K-12 run of
``benchmarks/proteome/run.py``, searched against the Swiss-Prot subsets without Escherichia), so nothing of the
Pfam or CATH benchmarks is used. Rows at most ``--max-identity`` identical to their query; the last 20% of the
MSAs (sorted by file name) are held out for the log-loss report. Writes the weights and a JSON of provenance and
log-losses next to them.

    .venv/bin/python benchmarks/context_model.py [--msa-dir DIR] [--out workflow_lib/data/context_pseudocounts.npz]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workflow_lib.aligner.context import DEFAULT_CONTEXT_MODEL, save_context_model  # noqa: E402
from workflow_lib.aligner.context_train import fit_context_model, read_alignments, training_columns  # noqa: E402
from workflow_lib.seqio.atomic import write_text_atomic  # noqa: E402

DEFAULT_MSAS = ROOT / "benchmarks" / "_work" / "proteome_s26_full" / "results" / "ecoli" / "msa"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--msa-dir", type=Path, default=DEFAULT_MSAS, help="directory of training A3Ms")
    parser.add_argument("--out", type=Path, default=DEFAULT_CONTEXT_MODEL)
    parser.add_argument("--half-width", type=int, default=6, help="window = 2h + 1 columns (default 6: 13)")
    parser.add_argument("--max-identity", type=float, default=0.5)
    parser.add_argument("--l2", type=float, default=1e-4)
    args = parser.parse_args(argv)
    paths = sorted(args.msa_dir.glob("*.a3m"))
    if not paths:
        parser.error(f"no .a3m files in {args.msa_dir}")
    started = time.perf_counter()
    columns = training_columns(read_alignments(paths), half_width=args.half_width, max_identity=args.max_identity)
    model, report = fit_context_model(columns, l2=args.l2)
    save_context_model(args.out, model)
    report.update({"msa_files": len(paths), "msas_used": int(len(set(columns.msa.tolist()))),
                   "msa_dir": str(args.msa_dir.relative_to(ROOT) if args.msa_dir.is_relative_to(ROOT) else args.msa_dir),
                   "half_width": args.half_width, "max_identity": args.max_identity, "l2": args.l2,
                   "seconds": round(time.perf_counter() - started, 1)})
    write_text_atomic(args.out.with_suffix(".json"), json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
