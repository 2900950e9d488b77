"""Matching predicted residues to the residues observed in the native chain.

A prediction covers the whole query sequence (often the full construct: tags, disordered termini, loops) while
an experimental chain holds only the residues that were resolved. The two are put on one index by a global
sequence alignment (Biopython's ``PairwiseAligner``: BLOSUM62, gap open −10, extend −0.5, free end gaps, so
unobserved termini cost nothing); when the sequences are equal the mapping is the identity. Every aligned
pair, identical or not, is a *matched* residue; gapped positions are not evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from Bio.Align import PairwiseAligner, substitution_matrices

GAP_OPEN = -10.0
GAP_EXTEND = -0.5


@dataclass(frozen=True)
class ResidueMatch:
    """Index pairs of a global alignment: ``first[k]`` of sequence one faces ``second[k]`` of sequence two.

    Attributes:
        first: int64 ``[K]`` ascending indices into the first sequence (the prediction).
        second: int64 ``[K]`` ascending indices into the second sequence (the native's observed residues).
        identical: number of pairs with the same letter.
    """

    first: np.ndarray
    second: np.ndarray
    identical: int

    @property
    def aligned(self) -> int:
        return int(self.first.size)

    @property
    def identity(self) -> float:
        """Identical pairs / aligned pairs (NaN when nothing is aligned)."""
        return self.identical / self.aligned if self.aligned else float("nan")

    def mapping(self, length: int) -> np.ndarray:
        """int64 ``[length]``: for each index of the first sequence its partner, −1 when unmatched."""
        out = np.full(length, -1, dtype=np.int64)
        out[self.first] = self.second
        return out


@lru_cache(maxsize=1)
def _aligner() -> PairwiseAligner:
    return PairwiseAligner(mode="global", substitution_matrix=substitution_matrices.load("BLOSUM62"),
                           open_gap_score=GAP_OPEN, extend_gap_score=GAP_EXTEND, end_gap_score=0.0)


def match_residues(first: str, second: str) -> ResidueMatch:
    """Residue pairs of the best global alignment of ``first`` and ``second`` (module docstring).

    Letters outside BLOSUM62 are read as X. Returns an empty match when either sequence is empty.
    """
    first, second = _clean(first), _clean(second)
    if not first or not second:
        empty = np.zeros(0, dtype=np.int64)
        return ResidueMatch(empty, empty, 0)
    if first == second:
        index = np.arange(len(first), dtype=np.int64)
        return ResidueMatch(index, index.copy(), len(first))
    alignment = _aligner().align(first, second)[0]
    one, two = np.asarray(alignment.indices, dtype=np.int64)
    paired = (one >= 0) & (two >= 0)
    one, two = one[paired], two[paired]
    identical = int(sum(first[i] == second[j] for i, j in zip(one.tolist(), two.tolist())))
    return ResidueMatch(one, two, identical)


def _clean(sequence: str) -> str:
    allowed = set("ARNDCQEGHILKMFPSTWYVBZX")
    return "".join(letter if letter in allowed else "X" for letter in sequence.upper())
