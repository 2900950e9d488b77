"""Template restraints in the fold, on the validation chains of a training pack: the fold from the network's
distogram alone against the fold with the best template's distances mixed in (``predict.template_weight``).

    python benchmarks/template_restraints.py --pack PACK [--model models/trackfold_small_v4.pt]
        [--weights 0,0.9] [--crop 192] [--out OUT.json] [--results-md benchmarks/RESULTS.md]

Per validation chain (its centre ``--crop`` residues, as ``benchmarks/model_validation.py`` crops them), the
checkpoint predicts with the chain's first 2 usable template hits (the pack's: never itself, none above 90%
identical), then the backbone is folded from the distogram as ``trackfold predict`` folds it (4 starts, the hand
chosen from ω / θ / φ) with each weight of ``--weights``
(:func:`workflow_lib.inference.template_restraints.restrained_distogram`; 0 = the network's distogram). Reported
per regime of the best template's identity over the crop's length (< 30%, ≥ 30%): lDDT-Cα and TM-score of the
fold, the paired difference to weight 0 with its standard error, and the Pearson r of the chains' mean pLDDT
(the network distogram's expected lDDT of the folded backbone, before the checkpoint's calibration) with
lDDT-Cα. CPU, one thread.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from datetime import datetime
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search_bench.report import publish  # noqa: E402
from workflow_lib.inference.confidence import expected_lddt  # noqa: E402
from workflow_lib.inference.fold import FoldOptions, fold_from_distogram  # noqa: E402
from workflow_lib.inference.template_restraints import restrained_distogram, template_identity  # noqa: E402
from workflow_lib.model.checkpoint import load_checkpoint  # noqa: E402
from workflow_lib.model.structure import cb_from_backbone  # noqa: E402
from workflow_lib.structure.metrics import lddt_ca, tm_score  # noqa: E402
from workflow_lib.training.examples import make_example  # noqa: E402
from workflow_lib.training.pack import read_pack  # noqa: E402

SECTION = "## Structure prediction: template restraints in the fold (validation chains)"


def chain_rows(model, chain, crop: int, weights: list[float]) -> dict:
    length = min(len(chain), crop)
    start = (len(chain) - length) // 2
    inputs, targets = make_example(chain, start, length, None, 64, model.config.msa_statistics, max_templates=2)
    with torch.no_grad():
        out = model(inputs)
    probs = torch.softmax(out["dist_logits"][0].float(), dim=-1).numpy()
    orientations = {k: torch.softmax(out[f"{k}_logits"][0].float(), dim=-1).numpy() for k in ("omega", "theta", "phi")}
    true_ca = np.where(targets["atom_mask"][0, :, 1:2].numpy(), targets["coords"][0, :, 1].numpy(), np.nan)
    features = {}
    if "templates_pair" in inputs:
        features = {"template_pair": inputs["templates_pair"][0].numpy(),
                    "template_1d": inputs["templates_1d"][0].numpy(),
                    "template_mask": inputs["template_mask"][0].numpy() > 0}
    row = {"name": chain.name, "length": length, "identity": template_identity(features) if features else 0.0}
    for weight in weights:
        target = restrained_distogram(probs, features, weight) if features else probs
        backbone, _ = fold_from_distogram(target, FoldOptions(), orientations=orientations)
        row[f"lddt_{weight}"] = float(lddt_ca(backbone[:, 1], true_ca).score)
        row[f"tm_{weight}"] = tm_score(backbone[:, 1], true_ca)
        row[f"plddt_{weight}"] = float(expected_lddt(probs, cb_from_backbone(torch.as_tensor(backbone)).numpy()).mean())
    return row


def report(rows: list[dict], weights: list[float], command: str) -> str:
    lines = [f"`{command}`, written {datetime.now():%Y-%m-%d %H:%M}: "
             f"{len(rows)} validation chains (their centre 192 residues), `trackfold_small_v4.pt`, up to 2 usable "
             f"template hits each; one torch thread, {platform.machine()}, torch {torch.__version__}.", "",
             "| best template identity (over the crop) | chains | weight | lDDT-Cα | TM-score | Δ lDDT-Cα vs 0 | Δ TM vs 0 | pLDDT r |",
             "|---|---|---|---|---|---|---|---|"]
    regimes = [("< 30%", lambda r: r["identity"] < 0.3), ("≥ 30%", lambda r: r["identity"] >= 0.3),
               ("all", lambda r: True)]
    for label, keep in regimes:
        chosen = [r for r in rows if keep(r)]
        if not chosen:
            continue
        for weight in weights:
            lddt = np.array([r[f"lddt_{weight}"] for r in chosen])
            tm = np.array([r[f"tm_{weight}"] for r in chosen])
            base_l = np.array([r[f"lddt_{weights[0]}"] for r in chosen])
            base_t = np.array([r[f"tm_{weights[0]}"] for r in chosen])
            plddt = np.array([r[f"plddt_{weight}"] for r in chosen])
            dl, dt = lddt - base_l, tm - base_t
            se = (lambda d: d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else float("nan"))
            r_value = float(np.corrcoef(plddt, lddt)[0, 1]) if len(chosen) > 2 else float("nan")
            lines.append(f"| {label} | {len(chosen)} | {weight:g} | {lddt.mean():.3f} | {tm.mean():.3f} | "
                         f"{dl.mean():+.3f} ± {se(dl):.3f} | {dt.mean():+.3f} ± {se(dt):.3f} | {r_value:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pack", required=True)
    parser.add_argument("--model", default=str(ROOT / "models" / "trackfold_small_v4.pt"))
    parser.add_argument("--weights", default="0,0.9")
    parser.add_argument("--crop", type=int, default=192)
    parser.add_argument("--out")
    parser.add_argument("--results-md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    weights = [float(w) for w in args.weights.split(",")]
    table, chains = read_pack(args.pack)
    val = [c for c, split in zip(chains, table["split"]) if split == "validation"]
    model = load_checkpoint(args.model)
    model = (model[0] if isinstance(model, tuple) else model).eval()
    rows = []
    for chain in val:
        rows.append(chain_rows(model, chain, args.crop, weights))
        print(json.dumps(rows[-1]), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    command = f"python benchmarks/template_restraints.py --pack PACK --weights {args.weights} --crop {args.crop}"
    publish(report(rows, weights, command), Path(args.results_md) if args.results_md else None, SECTION)


if __name__ == "__main__":
    main()
