"""Fitting a :class:`~workflow_lib.aligner.context.ContextModel` to real MSAs.

Training examples are MSA columns: the query's window of ``2h + 1`` residues around the column, and the
cluster-weighted counts of the residues that the other rows place in it (:func:`training_columns`). Only rows at
most ``max_identity`` identical to the query count, so the model learns the substitutions of remote homologs,
which are the ones pseudocounts have to anticipate. :func:`fit_context_model` maximises
``Σ_i Σ_x n_i(x) log cs_i(x)`` (L2-penalised) with L-BFGS in torch, on a split by MSA, and reports the held-out
log-loss next to that of the Gonnet pseudocounts the model replaces.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workflow_lib.aligner.context import N_INPUTS, OUTSIDE, ContextModel, log_softmax
from workflow_lib.aligner.profile import ADMIX_A, CLUSTER_IDENTITY, cluster_sequences
from workflow_lib.aligner.substitution import check_background, substitution_probabilities
from workflow_lib.seqio.alphabet import N_AMINO

WINDOW_X = N_AMINO
"""Window code of an unknown query residue (its input is the background distribution)."""
WINDOW_OUTSIDE = N_AMINO + 1
"""Window code of a position beyond either end of the query."""


@dataclass
class TrainingColumns:
    """``windows`` uint8 ``[N, 2h + 1]`` (codes 0..19, :data:`WINDOW_X`, :data:`WINDOW_OUTSIDE`), ``counts``
    float32 ``[N, 20]`` and ``msa`` int32 ``[N]`` (which input MSA each column comes from)."""

    windows: np.ndarray
    counts: np.ndarray
    msa: np.ndarray


def column_counts(alignment, *, max_identity: float, min_residues: int) -> np.ndarray | None:
    """Cluster-weighted residue counts ``[L, 20]`` of the rows (not the query) at most ``max_identity``
    identical to the query over their shared residues and with at least ``min_residues`` residues; None when
    no row qualifies."""
    matches = np.asarray(alignment.matches)
    if matches.shape[0] < 2:
        return None
    query, others = matches[0], matches[1:]
    residue = others < N_AMINO
    shared = residue & (query[None, :] < N_AMINO)
    identity = ((others == query[None, :]) & shared).sum(axis=1) / np.maximum(shared.sum(axis=1), 1)
    keep = (identity <= max_identity) & (residue.sum(axis=1) >= min_residues)
    if not keep.any():
        return None
    rows = others[keep]
    labels = cluster_sequences(rows, CLUSTER_IDENTITY)
    weight = 1.0 / np.bincount(labels)[labels]
    known = rows < N_AMINO
    counts = np.zeros((rows.shape[1], N_AMINO), dtype=np.float64)
    row_index, column = np.nonzero(known)
    np.add.at(counts, (column, rows[row_index, column]), weight[row_index])
    return counts


def training_columns(alignments: Iterable, *, half_width: int = 6, max_identity: float = 0.5,
                     min_residues: int = 30) -> TrainingColumns:
    """Windows and counts of every column that a qualifying row fills, over ``alignments``
    (:class:`~workflow_lib.seqio.msa.Alignment`, row 0 the query)."""
    windows, counts, msa = [], [], []
    for number, alignment in enumerate(alignments):
        filled = column_counts(alignment, max_identity=max_identity, min_residues=min_residues)
        if filled is None:
            continue
        query = np.asarray(alignment.matches[0])
        query = np.where(query < N_AMINO, query, WINDOW_X)
        padded = np.concatenate([np.full(half_width, WINDOW_OUTSIDE), query, np.full(half_width, WINDOW_OUTSIDE)])
        columns = np.flatnonzero(filled.sum(axis=1) > 0)
        view = np.lib.stride_tricks.sliding_window_view(padded, 2 * half_width + 1)
        windows.append(view[columns].astype(np.uint8))
        counts.append(filled[columns].astype(np.float32))
        msa.append(np.full(columns.size, number, dtype=np.int32))
    if not windows:
        raise ValueError("no MSA has a row within the identity limit: nothing to train on")
    return TrainingColumns(np.concatenate(windows), np.concatenate(counts), np.concatenate(msa))


def gonnet_log_loss(columns: TrainingColumns, background: np.ndarray | None = None, admix: float = ADMIX_A) -> float:
    """Nats per counted residue of the Gonnet pseudocounts with ``admix`` (how one-sequence profiles are made
    without a context model); X columns predict the background."""
    f = check_background(background).astype(np.float64)
    g = substitution_probabilities(f)
    centre = columns.windows[:, columns.windows.shape[1] // 2].astype(np.int64)
    known = centre < N_AMINO
    p = np.tile(f, (centre.size, 1))
    p[known] = admix * g[centre[known]] + (1 - admix) * np.eye(N_AMINO)[centre[known]]
    counts = columns.counts.astype(np.float64)
    return float(-(counts * np.log(p)).sum() / counts.sum())


def window_distributions(windows: np.ndarray, background: np.ndarray | None = None) -> np.ndarray:
    """The observed column distributions a profile holds for the window codes: float64 ``[N, 2h + 1, 20]``
    (one-hot residues, X = background, outside = all-zero)."""
    f = check_background(background).astype(np.float64)
    table = np.vstack([np.eye(N_AMINO), f[None, :], np.zeros((1, N_AMINO))])
    return table[np.asarray(windows, dtype=np.int64)]


def context_log_loss(model: ContextModel, columns: TrainingColumns, background: np.ndarray | None = None) -> float:
    """Nats per counted residue of ``model``'s predictions for ``columns`` (NumPy; the same predictions as
    :meth:`ContextModel.predict` on each window's query)."""
    log_p = log_softmax(model.window_logits(window_distributions(columns.windows, background),
                                            columns.windows == WINDOW_OUTSIDE))
    counts = columns.counts.astype(np.float64)
    return float(-(counts * log_p).sum() / counts.sum())


def fit_context_model(columns: TrainingColumns, background: np.ndarray | None = None, *, l2: float = 1e-4,
                      validation: float = 0.2, max_iter: int = 200) -> tuple[ContextModel, dict[str, float]]:
    """Maximum-likelihood weights (L-BFGS, full batch) on the MSAs outside the last ``validation`` fraction;
    returns the model and the log-losses (nats per residue) on both parts, with the Gonnet baseline."""
    import torch

    f = check_background(background).astype(np.float64)
    width = columns.windows.shape[1]
    n_msa = int(columns.msa.max()) + 1
    held_out = columns.msa >= int(round(n_msa * (1 - validation))) if validation > 0 else \
        np.zeros(columns.msa.size, bool)
    windows = torch.from_numpy(columns.windows.astype(np.int64))
    counts = torch.from_numpy(columns.counts.astype(np.float32))
    background_t = torch.from_numpy(f.astype(np.float32))
    weights = torch.zeros(width, N_INPUTS, N_AMINO, requires_grad=True)
    bias = torch.tensor(np.log(f), dtype=torch.float32, requires_grad=True)
    offsets = torch.arange(width)[None, :]

    def log_probabilities(rows: torch.Tensor) -> torch.Tensor:
        # per offset: 20 residues, X = background-weighted residues, outside
        table = torch.cat([weights[:, :N_AMINO], (background_t @ weights[:, :N_AMINO])[:, None],
                           weights[:, OUTSIDE:OUTSIDE + 1]], dim=1)           # [width, 22, 20]
        return torch.log_softmax(bias + table[offsets, windows[rows]].sum(dim=1), dim=1)

    def loss_on(rows: torch.Tensor) -> torch.Tensor:
        return -(counts[rows] * log_probabilities(rows)).sum() / counts[rows].sum()

    train_rows = torch.from_numpy(np.flatnonzero(~held_out))
    test_rows = torch.from_numpy(np.flatnonzero(held_out))
    optimizer = torch.optim.LBFGS([weights, bias], lr=1.0, max_iter=max_iter, history_size=20,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = loss_on(train_rows) + l2 * (weights ** 2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        report = {"train_nats": float(loss_on(train_rows)),
                  "validation_nats": float(loss_on(test_rows)) if test_rows.numel() else float("nan")}
    subset = TrainingColumns(columns.windows[held_out], columns.counts[held_out], columns.msa[held_out])
    report["validation_gonnet_nats"] = gonnet_log_loss(subset, f) if held_out.any() else float("nan")
    report["columns"] = int(columns.windows.shape[0])
    report["residues"] = float(columns.counts.sum())
    model = ContextModel(weights.detach().numpy().astype(np.float64), bias.detach().numpy().astype(np.float64))
    return model, report


def read_alignments(paths: Iterable[str | Path]):
    """A3M files as alignments, lazily."""
    from workflow_lib.seqio.msa import read_a3m
    for path in paths:
        yield read_a3m(path)


__all__ = ["TrainingColumns", "WINDOW_OUTSIDE", "WINDOW_X", "column_counts", "context_log_loss", "fit_context_model",
           "gonnet_log_loss", "read_alignments", "training_columns", "window_distributions"]
