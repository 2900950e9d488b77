"""Context-specific pseudocounts: the substitution distribution of a column predicted from its neighbourhood.

A substitution matrix gives every column with residue ``a`` the same pseudocounts ``g(a, ·)``. What substitutes
for a residue depends on where it sits: a glycine in a turn, a leucine inside a helix and a buried valine
accept different replacements, and the residues around a column tell them apart. HH-suite's context-specific
pseudocounts (Biegert & Söding 2009, PNAS 106:3770; the discriminative version: Angermüller, Biegert & Söding
2012, Bioinformatics 28:3240) predict a column's pseudocount distribution from a window of 13 columns around
it, and are what lets HHblits find remote homologs from a single sequence.

:class:`ContextModel` is the simplest discriminative form of that idea, a log-linear model over the window:

    cs_i(x) = softmax_x( b(x) + Σ_{j=−h..h} Σ_a q_{i+j}(a) · W[j, a, x] + [i+j outside] · W[j, OUT, x] )

``q_{i+j}`` is the observed (unsmoothed) distribution of column ``i + j``: one-hot for a single sequence, the
weighted frequencies for an MSA, so the same weights serve both. ``W`` has ``2h + 1`` offsets × 21 inputs (20
residues, "outside the sequence") × 20 outputs, ``b`` 20 biases; HH-suite's CRF adds hidden states on top.
:func:`~workflow_lib.aligner.profile.add_pseudocounts` uses ``cs_i`` in place of ``Σ_a q_i(a) g(a, ·)``, with
the same admixture τ_i.

The shipped weights (:data:`DEFAULT_CONTEXT_MODEL`, 13 columns) were fitted by maximum likelihood
(:func:`workflow_lib.aligner.context_train.fit_context_model`) to the residues that remote homologs place
in the columns of real MSAs: trackfold's own MSAs of 4,339 PDB chains (``pdb_chains_promod3``, every kind of
fold) against UniProt-2014 + the Swiss-Prot subsets (one iteration, the fast setting), rows at most 50%
identical to the query, chains at least 90% identical to a Pfam, CATH or SCOP benchmark protein left out
(``benchmarks/context_model.py`` refits them and writes the provenance, held-out likelihoods included, next to
the weights). On held-out MSAs they predict those residues better than the Gonnet matrix with the 0.9
admixture, and on proteome MSAs of another origin (the twelve *E. coli* MSAs against the Swiss-Prot subsets in
tests/data, never seen) slightly better. Weights fitted to the *E. coli* MSAs alone predicted those better but
lost remote homologs on the SCOP benchmark (the shipped weights there: benchmarks/RESULTS.md, "Remote homologs:
SCOP superfamilies"): the divergence of prokaryotic proteome homologs is not that of folds in general.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from workflow_lib.errors import InputError
from workflow_lib.seqio.alphabet import N_AMINO

OUTSIDE = N_AMINO
"""Input index of window positions beyond either end of the sequence."""
N_INPUTS = N_AMINO + 1
DEFAULT_CONTEXT_MODEL = Path(__file__).resolve().parent.parent / "data" / "context_pseudocounts.npz"


@dataclass(frozen=True, eq=False)
class ContextModel:
    """Log-linear context model: ``weights`` float64 ``[2h + 1, 21, 20]``, ``bias`` float64 ``[20]``."""

    weights: np.ndarray
    bias: np.ndarray

    def __post_init__(self) -> None:
        w, b = np.asarray(self.weights), np.asarray(self.bias)
        if w.ndim != 3 or w.shape[0] % 2 != 1 or w.shape[1:] != (N_INPUTS, N_AMINO):
            raise ValueError(f"context weights must be [2h + 1, {N_INPUTS}, {N_AMINO}], got {w.shape}")
        if b.shape != (N_AMINO,):
            raise ValueError(f"context bias must be [{N_AMINO}], got {b.shape}")
        if not (np.isfinite(w).all() and np.isfinite(b).all()):
            raise ValueError("context model has non-finite parameters")

    @property
    def half_width(self) -> int:
        return self.weights.shape[0] // 2

    def window_logits(self, windows: np.ndarray, outside: np.ndarray) -> np.ndarray:
        """Unnormalised log-probabilities ``[N, 20]`` of ``N`` windows: ``windows`` float ``[N, 2h + 1, 20]``
        column distributions, ``outside`` bool ``[N, 2h + 1]`` (positions beyond the sequence; their
        distributions are ignored). Raises ValueError for windows of another width."""
        windows = np.asarray(windows, dtype=np.float64)
        width = self.weights.shape[0]
        if windows.ndim != 3 or windows.shape[1:] != (width, N_AMINO) or np.shape(outside) != windows.shape[:2]:
            raise ValueError(f"windows of shape {windows.shape} for a model of {width} columns")
        residues = windows.reshape(len(windows), width * N_AMINO) @ self.weights[:, :N_AMINO].reshape(-1, N_AMINO)
        return self.bias + residues + np.asarray(outside, dtype=np.float64) @ self.weights[:, OUTSIDE]

    def logits(self, observed: np.ndarray) -> np.ndarray:
        """Unnormalised log-probabilities ``[L, 20]`` for the column distributions ``observed`` ``[L, 20]``."""
        q = np.asarray(observed, dtype=np.float64)
        length, half = q.shape[0], self.half_width
        padded = np.zeros((length + 2 * half, N_AMINO))
        padded[half:half + length] = q
        beyond = np.ones(length + 2 * half, dtype=bool)
        beyond[half:half + length] = False
        windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1, axis=0).transpose(0, 2, 1)
        return self.window_logits(windows, np.lib.stride_tricks.sliding_window_view(beyond, 2 * half + 1))

    def predict(self, observed: np.ndarray) -> np.ndarray:
        """Pseudocount distributions ``cs_i`` float64 ``[L, 20]`` (rows sum to 1)."""
        return np.exp(log_softmax(self.logits(observed)))


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-normalisation of ``[N, 20]`` logits."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def one_hot_columns(codes: np.ndarray, background: np.ndarray) -> np.ndarray:
    """Observed distributions of a single sequence as profiles hold them: one-hot rows, X = ``background``."""
    codes = np.asarray(codes)
    q = np.tile(np.asarray(background, np.float64), (codes.size, 1))
    known = codes < N_AMINO
    q[np.flatnonzero(known)] = 0.0
    q[np.flatnonzero(known), codes[known]] = 1.0
    return q


def save_context_model(path: str | Path, model: ContextModel) -> None:
    """Write ``weights`` and ``bias`` as an npz (atomically)."""
    from workflow_lib.seqio.atomic import atomic_path
    with atomic_path(path, suffix=".npz") as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, weights=np.asarray(model.weights, np.float64), bias=np.asarray(model.bias, np.float64))


@lru_cache(maxsize=8)
def _load(path: str) -> ContextModel:
    try:
        with np.load(path, allow_pickle=False) as data:
            weights, bias = data["weights"], data["bias"]
    except (OSError, KeyError, ValueError) as error:
        raise InputError(f"cannot read a context model (npz with 'weights' and 'bias'): {error}", path=path) from None
    try:
        return ContextModel(weights.astype(np.float64), bias.astype(np.float64))
    except ValueError as error:
        raise InputError(str(error), path=path) from None


def load_context_model(path: str | Path | None = None) -> ContextModel:
    """The model at ``path`` (default: the shipped :data:`DEFAULT_CONTEXT_MODEL`), cached per path."""
    return _load(str(Path(path) if path is not None else DEFAULT_CONTEXT_MODEL))


__all__ = ["ContextModel", "DEFAULT_CONTEXT_MODEL", "N_INPUTS", "OUTSIDE", "load_context_model", "log_softmax",
           "one_hot_columns", "save_context_model"]
