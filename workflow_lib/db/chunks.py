"""Length-balanced, deterministic proteome chunks.

A proteome of ``n`` proteins is cut into ``k = ceil(n / proteins_per_chunk)`` chunks. Proteins are taken
longest first (ties by position in the file) and each goes to the chunk with the fewest residues so far among
those not yet full (at most ``ceil(n / k)`` proteins; ties by chunk number): the longest-processing-time rule,
so every chunk gets about the same number of residues and of proteins. The result depends only on the
lengths and their order, so the DAG (built from the FASTA in ``rules/common.smk``) and the ``chunk`` rule
always agree.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workflow_lib.errors import InputError
from workflow_lib.seqio.fasta import Record


@dataclass(frozen=True)
class ChunkSettings:
    """How proteomes are cut into jobs (``trackfold chunk``; the workflow's config section ``chunks``)."""

    proteins_per_chunk: int = 50
    max_length: int = 5000
    too_long: str = "skip"

    def __post_init__(self) -> None:
        if self.proteins_per_chunk < 1:
            raise InputError(f"chunks.proteins_per_chunk must be at least 1, got {self.proteins_per_chunk}")
        if self.max_length < 1:
            raise InputError(f"chunks.max_length must be at least 1, got {self.max_length}")
        if self.too_long not in ("skip", "error"):
            raise InputError(f"chunks.too_long must be 'skip' or 'error', got {self.too_long!r}")


def assign_chunks(lengths: Sequence[int] | np.ndarray, proteins_per_chunk: int) -> np.ndarray:
    """Chunk number (0-based) for every protein, in input order; see the module docstring."""
    if proteins_per_chunk < 1:
        raise InputError(f"proteins_per_chunk must be at least 1, got {proteins_per_chunk}")
    lengths = np.asarray(lengths, dtype=np.int64)
    n = lengths.size
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    n_chunks = math.ceil(n / proteins_per_chunk)
    capacity = math.ceil(n / n_chunks)
    order = np.lexsort((np.arange(n), -lengths))  # longest first, then file order
    heap = [(0, chunk) for chunk in range(n_chunks)]
    counts = [0] * n_chunks
    assignment = np.empty(n, dtype=np.int32)
    for protein in order:
        residues, chunk = heapq.heappop(heap)
        assignment[protein] = chunk
        counts[chunk] += 1
        if counts[chunk] < capacity:
            heapq.heappush(heap, (residues + int(lengths[protein]), chunk))
    return assignment


def chunk_table(proteome: str, records: Sequence[Record],
                proteins_per_chunk: int = ChunkSettings.proteins_per_chunk, *,
                max_length: int | None = ChunkSettings.max_length, too_long: str = ChunkSettings.too_long,
                source: str | None = None) -> pd.DataFrame:
    """The CHUNKS table of a proteome (rows in FASTA order); the defaults are :class:`ChunkSettings`', as in the
    workflow and ``trackfold chunk``.

    Proteins longer than ``max_length`` (None: no limit) are either skipped (chunk -1, the reason in ``note``) or,
    with ``too_long="error"``, an InputError naming the record.
    """
    lengths = np.asarray([len(r) for r in records], dtype=np.int64)
    keep = np.ones(len(records), dtype=bool) if max_length is None else lengths <= max_length
    if too_long == "error" and not keep.all():
        index = int(np.flatnonzero(~keep)[0])
        raise InputError(f"protein of {lengths[index]} residues exceeds chunks.max_length={max_length}",
                         path=source, record=records[index].id)
    chunks = np.full(len(records), -1, dtype=np.int32)
    chunks[keep] = assign_chunks(lengths[keep], proteins_per_chunk)
    notes = ["" if k else f"skipped: {n} residues > max_length {max_length}" for k, n in zip(keep, lengths)]
    return pd.DataFrame({
        "proteome": proteome,
        "chunk": chunks,
        "protein": [r.id for r in records],
        "safe_id": [r.safe_id for r in records],
        "length": np.asarray(lengths, dtype=np.int32),
        "index": np.arange(len(records), dtype=np.int32),
        "note": notes,
    })


def chunk_name(chunk: int) -> str:
    return f"chunk_{chunk:04d}"
