"""A k-mer index of a database shard, so the prefilter looks up candidate diagonals instead of scanning residues.

Seed "Iterative MSA Alignment": HHblits cuts the database 10–100× with a gapless and a gapped prefilter
before Viterbi; DESIGN.md adds that candidates for the gapless stage may come from a k-mer index of the
database, as MMseqs2 does, so that the cost does not grow with every residue of the database.

Layout (one npz per shard, ``shard_NNN.kmer.npz``, schema :data:`KMER_INDEX`): every window of ``k``
consecutive standard residues (no X) of every sequence is a k-mer code ``sum(r_t * 20**(k-1-t))``; entries are
sorted by code (ties in database order), ``offsets[c]:offsets[c + 1]`` are the entries of code ``c``, and
each entry is (sequence index within the shard, start position). Built with one vectorised sort per shard.
"""

from __future__ import annotations

import numpy as np

from workflow_lib.errors import InputError
from workflow_lib.seqio.alphabet import N_AMINO
from workflow_lib.seqio.schemas import ArraySpec, NpzSchema

DEFAULT_K = 4
"""4-mers: 160,000 codes, so a database of R residues has about R / 160,000 entries per code (3-mers: R / 8,000).
With seeds at 4.5 bits the prefilter counts 4.6× fewer seeds than 3-mers at 3 bits and loses no more of the
homologs an exhaustive Viterbi finds (benchmarks/RESULTS.md, "Prefilter: reduction and homologs lost")."""

KMER_INDEX = NpzSchema("kmer_index", 1, {
    "k": ArraySpec("int32", ()),
    "offsets": ArraySpec("int64", ("C1",), "start of each code's entries; C1 = 20**k + 1"),
    "sequence": ArraySpec("uint32", ("E",), "sequence index within the shard"),
    "position": ArraySpec("uint32", ("E",), "0-based start of the k-mer in its sequence"),
}, "k-mer index of one database shard")


def kmer_codes(residues: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Codes of all windows of a flat residue array and whether each window is valid (all of 20 standard).

    Returns ``(codes int64 [n - k + 1], valid bool [n - k + 1])``.
    """
    residues = np.asarray(residues)
    n = residues.size - k + 1
    if n <= 0:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    codes = np.zeros(n, dtype=np.int64)
    valid = np.ones(n, dtype=bool)
    for t in range(k):
        window = residues[t:t + n].astype(np.int64)
        codes = codes * N_AMINO + np.minimum(window, N_AMINO - 1)
        valid &= window < N_AMINO
    return codes, valid


def build_kmer_index(residues: np.ndarray, offsets: np.ndarray, *, k: int = DEFAULT_K) -> dict[str, np.ndarray]:
    """Index a shard given as flat residues ``uint8 [R]`` and sequence ``offsets int64 [n + 1]``."""
    if not 1 <= k <= 6:
        raise InputError(f"k-mer length must be between 1 and 6, got {k}")
    codes, valid = kmer_codes(residues, k)
    starts = np.arange(codes.size, dtype=np.int64)
    sequence = np.searchsorted(offsets, starts, side="right") - 1
    inside = starts + k <= offsets[np.minimum(sequence + 1, offsets.size - 1)]  # window within one sequence
    keep = valid & inside
    codes, starts, sequence = codes[keep], starts[keep], sequence[keep]
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=N_AMINO ** k)
    index_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return {
        "k": np.array(k, dtype=np.int32),
        "offsets": index_offsets,
        "sequence": sequence[order].astype(np.uint32),
        "position": (starts[order] - offsets[sequence[order]]).astype(np.uint32),
    }
