"""Checkpoints side by side on the validation chains of a training pack: accuracy, geometry, MSA use, folding.

For each checkpoint and each validation chain (central ``--crop`` residues, the first ``--msa-rows`` MSA rows, as
the training's validation passes): lDDT-Cα, TM-score (residue i to residue i, the TM-score program's), distogram top-1 accuracy, long-range top-L/5 contact precision,
mean consecutive Cα–Cα distance and the radius of gyration against the native's; the same with the query alone
(``msa-rows 1`` and zero co-evolution maps, as a one-sequence MSA gives: does the network use its MSA?); and with ``--fold`` the structure folded from the predicted
distogram (:mod:`workflow_lib.inference.fold`; its hand chosen as ``trackfold predict`` does), with its pLDDT (the
lDDT it expects under the distogram, as ``predict`` writes it) and that pLDDT's Pearson r with the true lDDT-Cα
over chains (``fold_plddt_r``). The co-evolution baseline's contact precision (``coevo_p_l5_long``: the APC-corrected covariance norm of all
the chain's packed MSA rows, the network's co-evolution input) is reported beside them. With ``--precision float32,bfloat16`` every checkpoint also runs
under bfloat16 autocast (``trackfold predict --precision bfloat16``). CPU, one thread.

Templates (a pack with template hits, ``--templates K``): each checkpoint runs with the chain's first K usable
hits and again without templates, and every mean is also given over the chains whose best usable template is
30–90% identical over its aligned columns (``*_tpl30_90``); ``--native-template`` adds a run with the chain's
own structure as its only template (:func:`~workflow_lib.training.examples.native_template`).

    python benchmarks/model_validation.py --pack PACK --model NAME=PATH ... [--chains N] [--fold]
        [--precision float32[,bfloat16]] [--templates K] [--native-template] --out OUT.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np
import torch

from workflow_lib.evaluate.contacts import CONTACT_BINS, contact_precision
from workflow_lib.inference.confidence import expected_lddt
from workflow_lib.inference.fold import FoldOptions, fold_from_distogram
from workflow_lib.model.checkpoint import load_checkpoint
from workflow_lib.model.structure import cb_from_backbone
from workflow_lib.structure.metrics import lddt_ca, tm_score
from workflow_lib.training.examples import make_example, native_template
from workflow_lib.training.pack import best_template_identity, read_pack


def radius_of_gyration(ca: np.ndarray) -> float:
    ca = ca[np.isfinite(ca).all(axis=1)]
    return float(np.sqrt(((ca - ca.mean(axis=0)) ** 2).sum(axis=1).mean()))


def chain_row(model, chain, crop: int, rows: int, fold: bool, precision: str = "float32", templates: int = 0
              ) -> dict:
    length = min(len(chain), crop)
    start = (len(chain) - length) // 2
    inputs, targets = make_example(chain, start, length, None, rows, model.config.msa_statistics,
                                   max_templates=templates)
    baseline = inputs["coevolution"][0, ..., 0].numpy()
    if rows == 1:   # the query alone: its co-evolution maps are what a one-sequence MSA gives (zeros)
        inputs["coevolution"] = torch.zeros_like(inputs["coevolution"])
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
           "template_identity": best_template_identity(chain),
           "lddt_ca": float(lddt_ca(pred_ca, true_ca).score), "tm_score": tm_score(pred_ca, true_ca),
           "dist_top1": float((probs.argmax(-1) == dist_true)[pair_mask].mean()),
           "p_l5_long": contact_precision(probs[..., :CONTACT_BINS].sum(-1), true_contact, pair_mask, index, 24, top),
           "coevo_p_l5_long": contact_precision(baseline, true_contact, pair_mask, index, 24, top),
           "ca_ca": float(steps.mean()), "rg_ratio": radius_of_gyration(pred_ca) / radius_of_gyration(true_ca)}
    if fold:
        t0 = time.perf_counter()
        orientations = {k: torch.softmax(out[f"{k}_logits"][0].float(), dim=-1).numpy()
                        for k in ("omega", "theta", "phi")}          # as `trackfold predict` folds by default
        backbone, _ = fold_from_distogram(probs, FoldOptions(), orientations=orientations)
        row["fold_seconds"] = time.perf_counter() - t0
        row["fold_lddt_ca"] = float(lddt_ca(backbone[:, 1], true_ca).score)
        row["fold_tm_score"] = tm_score(backbone[:, 1], true_ca)
        row["fold_ca_ca"] = float(np.linalg.norm(np.diff(backbone[:, 1], axis=0), axis=1).mean())
        row["fold_rg_ratio"] = radius_of_gyration(backbone[:, 1]) / radius_of_gyration(true_ca)
        # the pLDDT `trackfold predict` writes for a folded backbone: the lDDT it expects under the distogram
        row["fold_plddt"] = float(expected_lddt(probs, cb_from_backbone(torch.as_tensor(backbone)).numpy()).mean())
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
    parser.add_argument("--templates", type=int, default=0,
                        help="templates per chain from the pack's hits (default 0); also runs without them")
    parser.add_argument("--native-template", action="store_true",
                        help="also run with the chain's own structure as its only template")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    table, chains = read_pack(args.pack)
    val = [c for c, split in zip(chains, table["split"]) if split == "validation"]
    val = val[:args.chains] if args.chains else val
    results, per_chain_rows = {}, {}
    for spec in args.model:
        name, path = spec.split("=", 1)
        model = load_checkpoint(path)
        model = model[0] if isinstance(model, tuple) else model
        model.eval()
        precisions = args.precision.split(",")
        runs = [(name if precision == "float32" else f"{name} ({precision})", args.msa_rows, precision,
                 args.templates, False) for precision in precisions]
        if args.templates:
            runs.append((f"{name} (no templates)", args.msa_rows, precisions[0], 0, False))
        runs.append((f"{name} (query only)", 1, precisions[0], 0, False))
        if args.native_template:
            runs.append((f"{name} (native template)", args.msa_rows, precisions[0], 1, True))
        for variant, rows, precision, templates, native in runs:
            per_chain = []
            for c in val:
                given = dataclasses.replace(c, templates=(native_template(c),)) if native else c
                row = chain_row(model, given, args.crop, rows, args.fold and rows > 1, precision, templates)
                per_chain.append({**row, "template_identity": best_template_identity(c)})   # the pack's best hit
            keys = [k for k in per_chain[0] if k not in ("name", "template_identity")]
            means = {k: float(np.nanmean([r[k] for r in per_chain])) for k in keys}
            if args.fold and rows > 1:
                means["plddt_free_fold_wins"] = float(np.mean([r["fold_lddt_ca"] > r["lddt_ca"] for r in per_chain]))
                means["fold_plddt_r"] = float(np.corrcoef([r["fold_plddt"] for r in per_chain],
                                                          [r["fold_lddt_ca"] for r in per_chain])[0, 1])
            remote = [r for r in per_chain if 0.3 <= r["template_identity"] <= 0.9]
            if remote:
                means["chains_tpl30_90"] = len(remote)
                for key in ("lddt_ca", "fold_lddt_ca", "tm_score", "fold_tm_score", "p_l5_long"):
                    if key in remote[0]:
                        means[f"{key}_tpl30_90"] = float(np.nanmean([r[key] for r in remote]))
            results[variant] = {"chains": len(per_chain), **means}
            per_chain_rows[variant] = per_chain
            print(variant, json.dumps({k: round(v, 3) for k, v in means.items()}), flush=True)
    with open(args.out, "w") as handle:
        json.dump({"pack": args.pack, "crop": args.crop, "msa_rows": args.msa_rows, "templates": args.templates,
                   "results": results, "per_chain": per_chain_rows}, handle, indent=1)


if __name__ == "__main__":
    main()
