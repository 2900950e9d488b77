"""Sub-command ``trackfold evaluate``: predicted structures against experimental ones.

``trackfold evaluate PRED.pdb NATIVE.pdb|cif [--native-chain C] [--pred-npz P.pred.npz] [--a3m Q.a3m]
[--name N] --out-dir DIR`` evaluates one prediction; ``trackfold evaluate --targets TARGETS.tsv --out-dir DIR``
evaluates every row of a TSV with a header line and the columns ``name pred native native_chain pred_npz a3m``
(the last three may be empty; relative paths are taken from the working directory). Both write
``evaluation.parquet``, ``evaluation_residues.parquet``, ``evaluation.json``, ``evaluation.html`` and the
figures into ``--out-dir`` (:mod:`workflow_lib.evaluate.core`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from workflow_lib.errors import InputError


def register(subparsers: argparse._SubParsersAction) -> None:
    evaluate = subparsers.add_parser(
        "evaluate", help="predicted vs native structures: lDDT-Cα, TM-score, pLDDT calibration, contacts",
        description="Evaluate predictions against experimental structures (one pair, or --targets TSV).")
    evaluate.add_argument("pred", nargs="?", help="predicted model (PDB, pLDDT in the B-factors)")
    evaluate.add_argument("native", nargs="?", help="experimental structure (PDB or mmCIF, .gz allowed)")
    evaluate.add_argument("--native-chain", default="", help="native chain id (default: the first protein chain)")
    evaluate.add_argument("--pred-npz", default="", help="the prediction's .pred.npz (distogram, pLDDT)")
    evaluate.add_argument("--a3m", default="", help="the A3M the prediction was made from (co-evolution baseline)")
    evaluate.add_argument("--name", default="", help="target name (default: the model's file name)")
    evaluate.add_argument("--targets", default=None,
                          help="TSV with a header: name, pred, native[, native_chain, pred_npz, a3m]")
    evaluate.add_argument("--out-dir", required=True, help="directory for evaluation.{parquet,json,html}, ...")
    evaluate.add_argument("--no-tmalign", action="store_true", help="skip TM-align (TM-score and RMSD NaN)")
    evaluate.set_defaults(handler=run_evaluate)


def run_evaluate(args: argparse.Namespace) -> int:
    from workflow_lib.evaluate.core import evaluate_targets, read_targets
    from workflow_lib.evaluate.summary import summary_means
    from workflow_lib.evaluate.tmalign import tmalign_executable

    if args.targets is not None:
        if args.pred or args.native:
            raise InputError("give either PRED NATIVE or --targets, not both")
        targets = read_targets(args.targets)
    else:
        if not (args.pred and args.native):
            raise InputError("give PRED and NATIVE, or --targets TSV")
        name = args.name or None
        targets = pd.DataFrame([{"name": name or _default_name(args.pred), "pred": args.pred,
                                 "native": args.native, "native_chain": args.native_chain,
                                 "pred_npz": args.pred_npz, "a3m": args.a3m}])
    if not args.no_tmalign and tmalign_executable() is None:
        print("trackfold evaluate: TMalign not found on PATH; tm_score and rmsd are NaN")
    table = evaluate_targets(targets, args.out_dir, tmalign=not args.no_tmalign)
    means = summary_means(table)
    shown = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in means.items()
             if k in ("count", "lddt_ca", "tm_score", "mean_plddt", "plddt_mae", "p_l5_long", "coevo_p_l5_long")}
    print(f"{Path(args.out_dir) / 'evaluation.parquet'}: {json.dumps(shown)}")
    return 0


def _default_name(path: str) -> str:
    from workflow_lib.structure.parse import entry_name

    return entry_name(path)
