"""A k-mer index of a database shard, so the prefilter looks up candidate diagonals instead of scanning residues.

HHblits (Remmert et al. 2012, Nat. Methods 9:173) cuts the database 10–100× with a gapless and a gapped prefilter
before Viterbi; DESIGN.md adds that candidates for the gapless stage may come from a k-mer index of the
database, as MMseqs2 does, so that the cost does not grow with every residue of the database.

**Seed shapes.** A k-mer is read through a *shape*, a string of ``1`` (a position that counts) and ``0`` (a
position skipped), as PatternHunter, MMseqs2 and DIAMOND use spaced seeds: ``1111`` is a contiguous 4-mer,
``1010011`` (the default, :data:`DEFAULT_SHAPE`) reads residues 0, 2, 5 and 6 of a 7-residue window. The
weight ``k`` (the number of ``1``) sets the code space (``20**k``) and so the entries per code; the gaps make
the seeds of one alignment less correlated, so at the same number of seeds more homologous diagonals get one.
``1010011`` at 5.0 bits (its default, :data:`~workflow_lib.search.settings.SPACED_EXTRA_BITS`) gives the same
Pfam benchmark scores as ``1111`` at 4.5 bits from fewer seeds (benchmarks/RESULTS.md, "Prefilter: seed shape
and the banded stage").

Layout (one npz per shard, ``shard_NNN.kmer.npz``, schema :data:`KMER_INDEX`): every window of ``span``
residues whose shape positions are standard residues (no X) gives the code ``sum(r_t * 20**(k-1-t))`` over
its shape positions ``t``; entries are sorted by code (ties in database order), ``offsets[c]:offsets[c + 1]``
are the entries of code ``c``, and each entry is (sequence index within the shard, window start). ``shape``
holds the offsets of the ``1`` positions; an index without it (written before shapes existed) is contiguous.
Built with one vectorised sort per shard.
"""

from __future__ import annotations

import numpy as np

from workflow_lib.errors import InputError
from workflow_lib.seqio.alphabet import N_AMINO

DEFAULT_K = 4
"""Weight of the default shape: 160,000 codes, so a database of R residues has about R / 160,000 entries per code
(3-mers: R / 8,000). Contiguous 4-mers at 4.5 bits count far fewer seeds than 3-mers at 3 bits and lose no
more of the homologs an exhaustive Viterbi finds (benchmarks/RESULTS.md, "Prefilter: reduction and homologs
lost")."""
DEFAULT_SHAPE = "1010011"
"""The database's seed shape unless ``db build`` is given another (module docstring)."""
MAX_WEIGHT = 6
MAX_SPAN = 16


def contiguous_shape(k: int) -> str:
    """The shape of plain ``k``-mers (``"1" * k``); ``InputError`` unless ``1 <= k <=`` :data:`MAX_WEIGHT`."""
    if not 1 <= k <= MAX_WEIGHT:
        raise InputError(f"k-mer length must be between 1 and {MAX_WEIGHT}, got {k}")
    return "1" * k


def shape_offsets(shape: str) -> np.ndarray:
    """Window offsets of the ``1`` positions of ``shape`` (int64); ``InputError`` for a malformed shape."""
    if (not isinstance(shape, str) or not shape or set(shape) - {"0", "1"} or shape[0] != "1"
            or shape[-1] != "1"):
        raise InputError(f"seed shape must be a string of 0 and 1 that starts and ends with 1, got {shape!r}")
    offsets = np.array([t for t, c in enumerate(shape) if c == "1"], dtype=np.int64)
    if not 1 <= offsets.size <= MAX_WEIGHT or len(shape) > MAX_SPAN:
        raise InputError(f"seed shape {shape!r}: needs 1-{MAX_WEIGHT} positions set and at most {MAX_SPAN} "
                         f"positions in all")
    return offsets


def index_offsets(index: dict[str, np.ndarray]) -> np.ndarray:
    """The window offsets of an index's shape: its ``shape`` array, or ``0 .. k-1`` for a contiguous index."""
    if "shape" in index:
        return np.asarray(index["shape"], dtype=np.int64)
    return np.arange(int(index["k"]), dtype=np.int64)


def index_shape(index: dict[str, np.ndarray]) -> str:
    """The shape string of an index (``"1111"`` for a contiguous 4-mer index)."""
    offsets = index_offsets(index)
    marks = np.zeros(int(offsets[-1]) + 1, dtype=bool)
    marks[offsets] = True
    return "".join("1" if m else "0" for m in marks)


def index_is_spaced(index: dict[str, np.ndarray]) -> bool:
    """Whether an index's seed shape has gaps (its default seed threshold is
    :data:`~workflow_lib.search.settings.SPACED_EXTRA_BITS` higher)."""
    return "0" in index_shape(index)


def kmer_codes(residues: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes of all windows of a flat residue array read through the shape ``offsets``
    (:func:`shape_offsets`), and whether each window is valid (standard residues at every offset).

    Returns ``(codes int64 [n - span + 1], valid bool [n - span + 1])``, ``span = offsets[-1] + 1``.
    """
    residues = np.asarray(residues)
    n = residues.size - int(offsets[-1])
    if n <= 0:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    codes = np.zeros(n, dtype=np.int64)
    valid = np.ones(n, dtype=bool)
    for t in offsets.tolist():
        window = residues[t:t + n].astype(np.int64)
        codes = codes * N_AMINO + np.minimum(window, N_AMINO - 1)
        valid &= window < N_AMINO
    return codes, valid


def build_kmer_index(residues: np.ndarray, offsets: np.ndarray, *, k: int | None = None,
                     shape: str | None = None) -> dict[str, np.ndarray]:
    """Index a shard given as flat residues ``uint8 [R]`` and sequence ``offsets int64 [n + 1]``.

    ``k``: contiguous ``k``-mers; ``shape``: a seed shape (module docstring); neither: :data:`DEFAULT_SHAPE`.
    """
    if k is not None and shape is not None:
        raise InputError("give a k-mer length or a seed shape, not both")
    shape = contiguous_shape(k) if k is not None else (DEFAULT_SHAPE if shape is None else shape)
    window_offsets = shape_offsets(shape)
    k, span = int(window_offsets.size), int(window_offsets[-1]) + 1
    codes, valid = kmer_codes(residues, window_offsets)
    starts = np.arange(codes.size, dtype=np.int64)
    sequence = np.searchsorted(offsets, starts, side="right") - 1
    inside = starts + span <= offsets[np.minimum(sequence + 1, offsets.size - 1)]  # window within one sequence
    keep = valid & inside
    codes, starts, sequence = codes[keep], starts[keep], sequence[keep]
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=N_AMINO ** k)
    code_starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return {
        "k": np.array(k, dtype=np.int32),
        "offsets": code_starts,
        "sequence": sequence[order].astype(np.uint32),
        "position": (starts[order] - offsets[sequence[order]]).astype(np.uint32),
        "shape": window_offsets.astype(np.int32),
    }
