"""Validation of the network during and after training.

:func:`evaluate`: every validation chain, whole when ``L ≤ val_crop`` else its central ``val_crop`` residues,
the first ``max_msa_rows`` MSA rows, eval mode. Metrics per chain, then the mean: lDDT-Cα of predicted vs true
CA (:func:`workflow_lib.structure.metrics.lddt_ca`), distogram top-1 accuracy (argmax distance bin = true bin,
no-contact bin included, over scored pairs ``i ≠ j``), and contact precision of the ``L/5`` most likely
contacts (``P(d_Cβ < 8 Å)`` = the first 12 distance bins; :func:`workflow_lib.evaluate.contacts.contact_precision`)
with sequence separation ≥ 24 ("long") and ≥ 12 ("medium + long"). With ``fold`` (the final validation) also
the backbone folded from the predicted distogram (:func:`workflow_lib.inference.fold.fold_from_distogram`, what
``trackfold predict`` writes by default): its lDDT-Cα and TM-score (:func:`workflow_lib.structure.metrics.tm_score`,
residues in correspondence); NaN without.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from workflow_lib.evaluate.contacts import CONTACT_BINS, contact_precision
from workflow_lib.model.network import ThreeTrackNetwork
from workflow_lib.schemas.training import VALIDATION_CHAINS
from workflow_lib.structure.metrics import lddt_ca, tm_score
from workflow_lib.training.config import TrainConfig
from workflow_lib.training.examples import TrainingChain, make_example, to_device
from workflow_lib.training.losses import LossWeights, total_loss


@torch.no_grad()
def chain_metrics(outputs: dict[str, torch.Tensor], targets: dict[str, torch.Tensor],
                  residue_index: np.ndarray, fold: bool = False) -> dict[str, float]:
    """lDDT-Cα, distogram top-1 accuracy and contact precisions of one prediction (batch of one); with ``fold``
    the folded backbone's lDDT-Cα and TM-score (NaN without)."""
    pred_ca = outputs["coords"][0, :, 1].double().cpu().numpy()
    true = targets["coords"][0].double().cpu().numpy()
    true_ca = np.where(targets["atom_mask"][0, :, 1:2].cpu().numpy(), true[:, 1], np.nan)
    lddt = lddt_ca(pred_ca, true_ca).score
    pair_mask = targets["pair_mask"][0].cpu().numpy().astype(bool)
    dist_true = targets["dist"][0].cpu().numpy()
    logits = outputs["dist_logits"][0].float().cpu()
    top1 = (logits.argmax(-1).numpy() == dist_true)
    accuracy = float(top1[pair_mask].mean()) if pair_mask.any() else float("nan")
    dist_probs = torch.softmax(logits, dim=-1).numpy()
    contact_prob = dist_probs[..., :CONTACT_BINS].sum(-1)
    true_contact = dist_true < CONTACT_BINS
    top = max(1, len(residue_index) // 5)
    fold_lddt = fold_tm = float("nan")
    if fold:
        from workflow_lib.inference.fold import FoldOptions, fold_from_distogram

        orientations = {k: torch.softmax(outputs[f"{k}_logits"][0].float().cpu(), dim=-1).numpy()
                        for k in ("omega", "theta", "phi")}          # they choose the hand, as in predict
        backbone, _ = fold_from_distogram(dist_probs.astype(np.float64), FoldOptions(), orientations=orientations)
        fold_lddt = float(lddt_ca(backbone[:, 1], true_ca).score)
        fold_tm = tm_score(backbone[:, 1], true_ca)
    return {"lddt_ca": float(lddt), "fold_lddt_ca": fold_lddt, "fold_tm_score": fold_tm, "dist_top1": accuracy,
            "contact_precision_long": contact_precision(contact_prob, true_contact, pair_mask, residue_index, 24,
                                                        top),
            "contact_precision_medlong": contact_precision(contact_prob, true_contact, pair_mask, residue_index,
                                                           12, top)}


@torch.no_grad()
def evaluate(model: ThreeTrackNetwork, chains: Sequence[TrainingChain], config: TrainConfig, *,
             fold: bool = False) -> pd.DataFrame:
    """Per-chain validation metrics (:data:`VALIDATION_CHAINS` columns; module docstring)."""
    was_training = model.training
    device = next(model.parameters()).device
    model.eval()
    weights = LossWeights(**config.loss_weights)
    rows = []
    try:
        for chain in chains:
            length = min(len(chain), config.val_crop)
            start = (len(chain) - length) // 2
            example = make_example(chain, start, length, None, config.max_msa_rows, model.config.msa_statistics,
                                   config.max_templates)
            inputs, targets = to_device(example, device)
            outputs = model(inputs)
            _, parts = total_loss(outputs, targets, weights)
            metrics = chain_metrics(outputs, targets, inputs["residue_index"][0].cpu().numpy(), fold)
            rows.append({"name": chain.name, "length": length, **metrics, "loss": parts["loss"]})
    finally:
        model.train(was_training)
    return pd.DataFrame(rows, columns=[f.name for f in VALIDATION_CHAINS.schema])
