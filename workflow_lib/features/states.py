"""The 21 statistics states shared by the MSA features and the co-evolution kernel, and block sizing.

States: the 20 amino acids (residue codes 0..19) and one state (20) for both the gap and X -- an unknown
residue carries no amino-acid information (trRosetta folds it into the gap state the same way).
"""

from __future__ import annotations

import numpy as np

from workflow_lib.schemas.features import PROFILE_STATES
from workflow_lib.seqio.alphabet import N_AMINO

GAP_STATE = N_AMINO
"""The state of gaps and X (20)."""

DEFAULT_BLOCK_BYTES = 64 << 20
"""Size bound of one block of one-hot rows or pair frequencies (64 MiB); peak memory is a small multiple."""


def to_states(codes: np.ndarray) -> np.ndarray:
    """Residue codes ``[*]`` (0..21) -> states uint8 ``[*]`` (0..19 amino acids, 20 gap or X)."""
    codes = np.asarray(codes)
    return np.where(codes >= N_AMINO, GAP_STATE, codes).astype(np.uint8)


def one_hot_states(states: np.ndarray, dtype: type = np.float32) -> np.ndarray:
    """States ``[*]`` -> one-hot ``[*, 21]`` of ``dtype``."""
    return np.eye(PROFILE_STATES, dtype=dtype)[np.asarray(states, dtype=np.intp)]


def rows_per_block(row_bytes: int, block_bytes: int) -> int:
    """How many rows of ``row_bytes`` fit in ``block_bytes`` (at least one)."""
    return max(1, int(block_bytes) // max(1, int(row_bytes)))
