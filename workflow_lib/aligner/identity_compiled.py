"""Compiled (numba) twins of the MSA's two all-against-all identity loops: the cluster weights of a profile
(:func:`workflow_lib.aligner.profile.cluster_sequences`, the sequence weights of the profile's emissions) and the
greedy redundancy filter between search iterations (:func:`workflow_lib.search.iterative.filter_alignment`, as
HH-suite filters its MSAs; Steinegger et al. 2019, BMC Bioinformatics 20:473).

Both compare one row with earlier rows over all match columns: shared residues (both rows have one) and identical
residues among them, then ``identical > identity · shared``. NumPy does each row against a block of rows with
four [rows, L] temporaries; here one pass over the two rows' bytes counts both (branch-free sums that LLVM
vectorises), and the filter stops at the first kept row a candidate is too similar to. Counts are integers and
the threshold test is the same float64 product, so the results are identical to the NumPy functions'. Used when
:func:`workflow_lib.aligner.device.compiled_available`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from workflow_lib.aligner.device import numba_module


@lru_cache(maxsize=None)
def _kernels():
    numba = numba_module()
    jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")

    @jit
    def similar(matches, a, b, gap, identity):
        """Whether rows ``a`` and ``b`` share a residue (code below ``gap``) and more than ``identity`` of the
        shared ones are identical."""
        row_a = matches[a]
        row_b = matches[b]
        gap = np.uint8(gap)
        shared = np.int32(0)
        same = np.int32(0)
        for j in range(row_a.size):
            x = row_a[j]
            y = row_b[j]
            both = np.int32((x < gap) & (y < gap))
            shared += both
            same += both & np.int32(x == y)
        return shared > 0 and same > identity * shared

    @jit
    def cluster(matches, gap, identity):
        count = matches.shape[0]
        labels = np.arange(count)
        marked = np.zeros(count, np.bool_)
        for row in range(1, count):
            target = count
            for k in range(row):
                if similar(matches, row, k, gap, identity):
                    label = labels[k]
                    marked[label] = True
                    if label < target:
                        target = label
            if target < count:
                for k in range(row):
                    if marked[labels[k]]:
                        labels[k] = target
                labels[row] = target
                marked[:] = False
        return labels

    @jit
    def greedy(matches, candidates, gap, identity, limit):
        kept = np.empty(candidates.size, np.int64)
        kept[0] = candidates[0]
        n_kept = 1
        for c in range(1, candidates.size):
            if n_kept >= limit:
                break
            row = candidates[c]
            too_similar = False
            for k in range(n_kept):
                if similar(matches, row, kept[k], gap, identity):
                    too_similar = True
                    break
            if not too_similar:
                kept[n_kept] = row
                n_kept += 1
        return kept[:n_kept].copy()

    return cluster, greedy


def cluster_labels_compiled(matches: np.ndarray, gap: int, identity: float) -> np.ndarray:
    """The raw cluster labels of :func:`~workflow_lib.aligner.profile.cluster_sequences` (each row's label is the
    smallest row index of its single-linkage cluster at ``identity``; residues are codes below ``gap``)."""
    return _kernels()[0](np.ascontiguousarray(matches, dtype=np.uint8), int(gap), float(identity))


def greedy_filter_compiled(matches: np.ndarray, candidates: list[int] | np.ndarray, gap: int, max_identity: float,
                           max_sequences: int | None) -> list[int]:
    """The rows :func:`~workflow_lib.search.iterative.filter_alignment` keeps of ``candidates`` (in order, the
    first always): a candidate is kept unless it is more than ``max_identity`` identical to a row kept before
    it (residues: codes other than ``gap``, so ``gap`` must be the largest code), up to ``max_sequences``."""
    candidates = np.asarray(candidates, dtype=np.int64)
    if candidates.size == 0:
        return []
    limit = candidates.size if max_sequences is None else int(max_sequences)
    return _kernels()[1](np.ascontiguousarray(matches, dtype=np.uint8), candidates, int(gap),
                         float(max_identity), limit).tolist()
