"""The hand of the distogram fold: the lowest-energy start as it is, the helix rule, the orientation energy.

For the first ``--chains`` validation chains of a training pack (central 192 residues, the first 64 MSA rows,
``--templates`` of the pack's usable hits), the checkpoint's predicted distogram is folded
(:func:`workflow_lib.inference.fold.fold_from_distogram`) three ways: without the hand choice
(``choose_hand=False``), with it and no orientation maps (the right-handed α-helix rule alone decides), and with
it and only the orientation maps (the helix rule switched off, so the ω / θ / φ energy decides). Prints one JSON
line per chain (lDDT-Cα and TM-score of each) and the means. CPU, one thread.

    python benchmarks/fold_hand.py --pack PACK --model CKPT [--chains 40] [--templates 2]
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

import workflow_lib.inference.fold as fold_module
from workflow_lib.inference.fold import FoldOptions, fold_from_distogram
from workflow_lib.model.checkpoint import load_checkpoint
from workflow_lib.structure.metrics import lddt_ca, tm_score
from workflow_lib.training.examples import make_example
from workflow_lib.training.pack import read_pack


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--chains", type=int, default=40)
    parser.add_argument("--templates", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    table, chains = read_pack(args.pack)
    val = [c for c, split in zip(chains, table["split"]) if split == "validation"][:args.chains]
    model, _ = load_checkpoint(args.model)
    model.eval()
    helix_margin = fold_module.HELIX_MARGIN
    rows = []
    for chain in val:
        length = min(len(chain), 192)
        inputs, targets = make_example(chain, (len(chain) - length) // 2, length, None, 64,
                                       model.config.msa_statistics, max_templates=args.templates)
        with torch.no_grad():
            out = model(inputs)
        probs = {k: torch.softmax(out[f"{k}_logits"][0].float(), -1).numpy() for k in ("dist", "omega", "theta", "phi")}
        orientations = {k: probs[k] for k in ("omega", "theta", "phi")}
        true_ca = np.where(targets["atom_mask"][0, :, 1:2].numpy(), targets["coords"][0, :, 1].numpy(), np.nan)
        row = {"name": chain.name}
        for name, options, given, margin in (("as_is", FoldOptions(choose_hand=False), None, helix_margin),
                                             ("helix_rule", FoldOptions(), None, helix_margin),
                                             ("orientation", FoldOptions(), orientations, 10**9)):
            fold_module.HELIX_MARGIN = margin
            backbone, _ = fold_from_distogram(probs["dist"], options, orientations=given)
            row[name] = [float(lddt_ca(backbone[:, 1], true_ca).score), tm_score(backbone[:, 1], true_ca)]
        fold_module.HELIX_MARGIN = helix_margin
        rows.append(row)
        print(json.dumps(row), flush=True)
    for name in ("as_is", "helix_rule", "orientation"):
        print(name, json.dumps({"lddt_ca": round(float(np.mean([r[name][0] for r in rows])), 3),
                                "tm_score": round(float(np.mean([r[name][1] for r in rows])), 3)}))


if __name__ == "__main__":
    main()
