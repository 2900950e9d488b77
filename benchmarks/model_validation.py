"""Checkpoints side by side on the validation chains of a training pack: accuracy, geometry, MSA use, folding.

For each checkpoint and each validation chain (central ``--crop`` residues, the first ``--msa-rows`` MSA rows, as
the training's validation passes): lDDT-Cα, distogram top-1 accuracy, long-range top-L/5 contact precision,
mean consecutive Cα–Cα distance and the radius of gyration against the native's; the same with the query alone
(``msa-rows 1``: does the network use its MSA?); and with ``--fold`` the structure folded from the predicted
distogram (:mod:`workflow_lib.inference.fold`). The co-evolution baseline's contact precision (APC covariance
from the same MSA rows) is reported beside them. With ``--precision float32,bfloat16`` every checkpoint also runs
under bfloat16 autocast (``trackfold predict --precision bfloat16``). CPU, one thread.

    python benchmarks/model_validation.py --pack PACK --model NAME=PATH ... [--chains N] [--fold]
        [--precision float32[,bfloat16]] --out OUT.json
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from workflow_lib.evaluate.contacts import CONTACT_BINS, contact_precision
from workflow_lib.inference.fold import FoldOptions, fold_from_distogram
from workflow_lib.model.checkpoint import load_checkpoint
from workflow_lib.structure.metrics import lddt_ca
from workflow_lib.training.examples import make_example
from workflow_lib.training.pack import read_pack


def radius_of_gyration(ca: np.ndarray) -> float:
    ca = ca[np.isfinite(ca).all(axis=1)]
    return float(np.sqrt(((ca - ca.mean(axis=0)) ** 2).sum(axis=1).mean()))


def chain_row(model, chain, crop: int, rows: int, fold: bool, precision: str = "float32") -> dict:
    length = min(len(chain), crop)
    start = (len(chain) - length) // 2
    inputs, targets = make_example(chain, start, length, None, rows, model.config.msa_statistics)
    t0 = time.perf_counter()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
        out = model(inputs)
    seconds = time.perf_counter() - t0
    true_ca = np.where(targets["atom_mask"][0, :, 1:2].numpy(), targets["coords"][0, :, 1].numpy(), np.nan)
    pred_ca = out["coords"][0, :, 1].double().numpy()
    probs = torch.softmax(out["dist_logits"][0].float(), dim=-1).numpy()
    pair_mask = targets["pair_mask"][0].numpy().astype(bool)
    dist_true = targets["dist"][0].numpy()
    true_contact = dist_true < CONTACT_BINS
    index = inputs["residue_index"][0].numpy()
    top = max(1, length // 5)
    steps = np.linalg.norm(np.diff(pred_ca, axis=0), axis=1)
    row = {"name": chain.name, "length": length, "seconds": seconds,
           "lddt_ca": float(lddt_ca(pred_ca, true_ca).score),
           "dist_top1": float((probs.argmax(-1) == dist_true)[pair_mask].mean()),
           "p_l5_long": contact_precision(probs[..., :CONTACT_BINS].sum(-1), true_contact, pair_mask, index, 24, top),
           "ca_ca": float(steps.mean()), "rg_ratio": radius_of_gyration(pred_ca) / radius_of_gyration(true_ca)}
    if fold:
        t0 = time.perf_counter()
        backbone, _ = fold_from_distogram(probs, FoldOptions())
        row["fold_seconds"] = time.perf_counter() - t0
        row["fold_lddt_ca"] = float(lddt_ca(backbone[:, 1], true_ca).score)
        row["fold_ca_ca"] = float(np.linalg.norm(np.diff(backbone[:, 1], axis=0), axis=1).mean())
        row["fold_rg_ratio"] = radius_of_gyration(backbone[:, 1]) / radius_of_gyration(true_ca)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", required=True)
    parser.add_argument("--model", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--chains", type=int, default=0, help="first N validation chains (0: all)")
    parser.add_argument("--crop", type=int, default=192)
    parser.add_argument("--msa-rows", type=int, default=64)
    parser.add_argument("--fold", action="store_true")
    parser.add_argument("--precision", default="float32",
                        help="comma-separated among float32, bfloat16: each checkpoint runs in each (default float32)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    table, chains = read_pack(args.pack)
    val = [c for c, split in zip(chains, table["split"]) if split == "validation"]
    val = val[:args.chains] if args.chains else val
    results = {}
    for spec in args.model:
        name, path = spec.split("=", 1)
        model = load_checkpoint(path)
        model = model[0] if isinstance(model, tuple) else model
        model.eval()
        precisions = args.precision.split(",")
        runs = [(name if precision == "float32" else f"{name} ({precision})", args.msa_rows, precision)
                for precision in precisions] + [(f"{name} (query only)", 1, precisions[0])]
        for variant, rows, precision in runs:
            per_chain = [chain_row(model, c, args.crop, rows, args.fold and rows > 1, precision) for c in val]
            keys = [k for k in per_chain[0] if k != "name"]
            means = {k: float(np.nanmean([r[k] for r in per_chain])) for k in keys}
            if args.fold and rows > 1:
                means["plddt_free_fold_wins"] = float(np.mean([r["fold_lddt_ca"] > r["lddt_ca"] for r in per_chain]))
            results[variant] = {"chains": len(per_chain), **means}
            print(variant, json.dumps({k: round(v, 3) for k, v in means.items()}), flush=True)
    with open(args.out, "w") as handle:
        json.dump({"pack": args.pack, "crop": args.crop, "msa_rows": args.msa_rows, "results": results}, handle,
                  indent=1)


if __name__ == "__main__":
    main()
