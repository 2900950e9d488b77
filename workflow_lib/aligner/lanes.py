"""Batch APIs: bucket targets by length into lanes, run the lane kernels, spread work over processes.

HH-suite3 packs 4 or 8 templates into one SIMD register (Steinegger et al. 2019, BMC Bioinformatics 20:473); here a
lane axis holds up to :data:`MAX_LANES` targets of similar length. Targets are sorted by length and cut into
buckets whose lane count keeps one DP row (``Lt × W`` cells) near :data:`LANE_CELLS` (a row's buffers stay in
the L2 cache: benchmarks/RESULTS.md, "Viterbi kernel") and, with a backtrace, the ``Lq × Lt × W`` byte matrix under
:data:`BACKTRACE_BYTES`. Where the cuts fall is a small optimisation (:func:`min_cost_buckets`): every lane
is padded to its bucket's longest target, and every bucket pays a fixed cost per DP row (its ~20 NumPy calls),
so the cuts minimise padded cells plus :data:`ROW_COST_CELLS` per bucket.

``cpus > 1`` spreads buckets (one query, many targets) or queries (many queries) over a ``multiprocessing``
pool (fork start method where available, so the targets are inherited rather than pickled); results always
come back in input order.

``device=`` (sequence–profile only) selects the backend: the NumPy kernels here, or the torch kernel of
:mod:`workflow_lib.aligner.torch_kernels` (automatically on CUDA when available).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
from collections.abc import Sequence

import numpy as np

from workflow_lib.aligner.profile import Profile
from workflow_lib.aligner.scores import (HHSUITE_SHIFT, SCALE, Hit, PairScores, SequenceScores, pair_scores,
                                         sequence_scores)
from workflow_lib.aligner.torch_kernels import (NUMPY, TORCH_BACKTRACE_BYTES, TORCH_LANE_CELLS, TORCH_MAX_LANES,
                                                align_lane_batch_torch, align_mixed_batch_torch, resolve_device)
from workflow_lib.aligner.viterbi_hmm import align_template_batch
from workflow_lib.aligner.viterbi_seq import align_lane_batch, padded_length

LANE_CELLS = 48 * 1024
MAX_LANES = 512
MIN_LANES = 8
BACKTRACE_BYTES = 96 * 1024 * 1024
ROW_COST_CELLS = 8192
"""Fixed cost of one bucket's DP row, in cells: of the order of the Viterbi kernel's time for its NumPy calls of
one row over its time per cell (on the Pfam survivors half this value cut the same CPU, smaller ones cost more).
The gapped stage's Smith–Waterman rows (~18 calls) use the same value."""
ALIGN_PROFILES_LANE_CELLS = 16 * 1024
"""Cells per DP row of a bucket of the profile–profile lane kernel (the default of :func:`align_profiles`)."""
TORCH_ROW_COST_CELLS = 1 << 22
"""On a GPU a row's kernel launches cost far more than its cells: buckets as wide as the limits allow."""


def lane_width(target_length: int, query_length: int, *, backtrace: bool, lane_cells: int = LANE_CELLS,
               max_lanes: int = MAX_LANES, backtrace_bytes: int = BACKTRACE_BYTES) -> int:
    """Lanes for a bucket whose longest target has ``target_length`` residues."""
    width = max(MIN_LANES, min(max_lanes, lane_cells // max(target_length, 1)))
    if backtrace:
        width = min(width, max(1, backtrace_bytes // max(1, query_length * target_length)))
    return max(1, width)


def _paired_vectors(first, second, first_name: str, second_name: str,
                    first_dtype) -> tuple[np.ndarray, np.ndarray]:
    """``first`` (as ``first_dtype``) and ``second`` (int64) as 1-D arrays of one size, else ``ValueError``."""
    first, second = np.asarray(first, dtype=first_dtype), np.asarray(second, dtype=np.int64)
    if first.shape != second.shape or first.ndim != 1:
        raise ValueError(f"{first_name} and {second_name} must be 1-D arrays of the same size")
    return first, second


def min_cost_buckets(lengths: Sequence[int] | np.ndarray, max_widths: Sequence[int] | np.ndarray,
                     row_cost_cells: float) -> list[list[int]]:
    """Indices grouped into buckets of consecutive lengths (ascending, stable), minimising
    ``Σ_buckets (row_cost_cells + |bucket| · longest length in the bucket)``: the cells of one DP row with every
    lane padded to its bucket's longest target, plus a fixed cost per bucket row. A bucket whose longest member
    is ``k`` holds at most ``max_widths[k]`` indices (≥ 1).

    Exact, by dynamic programming over the sorted lengths (the best cut before each position), one NumPy
    call per position over the widths allowed there: ``O(n · max width)`` work in ``O(n)`` calls.
    """
    lengths, widths = _paired_vectors(lengths, max_widths, "lengths", "max_widths", np.float64)
    if widths.size and int(widths.min()) < 1:
        raise ValueError("every max width must be at least 1")
    order = np.argsort(lengths, kind="stable")
    n = order.size
    if n == 0:
        return []
    sorted_lengths, sorted_widths = lengths[order], widths[order]
    if sorted_lengths[0] == sorted_lengths[-1] and n <= int(sorted_widths.min()):
        return [order.tolist()]  # all one length, one bucket: no padding, one row cost
    span = int(min(sorted_widths.max(), n))
    members = np.arange(span, 0, -1, dtype=np.float64)  # |bucket| for the starts j − span .. j − 1
    cost = np.zeros(n + 1, dtype=np.float64)
    start = np.zeros(n + 1, dtype=np.int64)
    for j in range(1, n + 1):
        low = max(0, j - int(sorted_widths[j - 1]))
        candidates = cost[low:j] + members[span - (j - low):] * sorted_lengths[j - 1]
        best = int(np.argmin(candidates))
        cost[j] = candidates[best] + row_cost_cells
        start[j] = low + best
    buckets = []
    j = n
    while j > 0:
        buckets.append(order[start[j]:j].tolist())
        j = int(start[j])
    return buckets[::-1]


def length_buckets(lengths: Sequence[int], query_length: int, *, backtrace: bool,
                   lane_cells: int = LANE_CELLS, max_lanes: int = MAX_LANES,
                   backtrace_bytes: int = BACKTRACE_BYTES, row_cost_cells: float = ROW_COST_CELLS) -> list[list[int]]:
    """Indices grouped into buckets of similar length (ascending), each within its :func:`lane_width`, with the
    fewest padded cells plus ``row_cost_cells`` per bucket (:func:`min_cost_buckets`; lengths rounded up as
    :func:`~workflow_lib.aligner.viterbi_seq.pack_targets` pads them)."""
    lengths = [int(length) for length in lengths]
    widths = [lane_width(length, query_length, backtrace=backtrace, lane_cells=lane_cells, max_lanes=max_lanes,
                         backtrace_bytes=backtrace_bytes) for length in lengths]
    return min_cost_buckets([padded_length(max(length, 1)) for length in lengths], widths, row_cost_cells)


def resolve_cpus(cpus: int | None) -> int:
    """``None`` or ``0`` → all cores available to this process; otherwise ``cpus`` (≥ 1)."""
    if cpus is None or cpus == 0:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cpus < 0:
        raise ValueError("cpus must be >= 0")
    return int(cpus)


def _context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


_SHARED: dict[str, object] = {}


def _install_shared(shared: dict[str, object]) -> None:
    """Pool initializer: with fork the dict is inherited, with spawn it is pickled once per worker."""
    _SHARED.update(shared)


def _pool(workers: int):
    return _context().Pool(workers, initializer=_install_shared, initargs=(dict(_SHARED),))


def _seq_bucket_task(args: tuple[int, list[int], bool]) -> list[Hit]:
    query_index, indices, backtrace = args
    scores = _SHARED["scores"][query_index]
    trace_from = _SHARED.get("trace_from")
    return align_lane_batch(scores, _SHARED["targets"], indices, backtrace=backtrace,
                            trace_from=None if trace_from is None else trace_from[indices])


def _check_targets(targets: Sequence[np.ndarray]) -> list[np.ndarray]:
    checked = []
    for number, target in enumerate(targets):
        codes = np.asarray(target)
        if codes.ndim != 1 or codes.size == 0:
            raise ValueError(f"target {number} must be a non-empty 1-D code array")
        if codes.dtype != np.uint8:
            codes = codes.astype(np.uint8)
        if codes.size and int(codes.max()) > 20:
            raise ValueError(f"target {number} has codes outside 0..20 (gaps are not allowed)")
        checked.append(codes)
    return checked


def _run_seq(scores_list: list[SequenceScores], targets: list[np.ndarray],
             tasks: list[tuple[int, list[int], bool]], cpus: int,
             trace_from: np.ndarray | None = None) -> list[list[Hit]]:
    _SHARED["scores"], _SHARED["targets"] = scores_list, targets
    if trace_from is not None:
        _SHARED["trace_from"] = trace_from
    try:
        if cpus <= 1 or len(tasks) <= 1:
            return [_seq_bucket_task(task) for task in tasks]
        with _pool(min(cpus, len(tasks))) as pool:
            return pool.map(_seq_bucket_task, tasks, chunksize=1)
    finally:
        _SHARED.clear()


def align_targets(profile: Profile | SequenceScores, targets: Sequence[np.ndarray], *, backtrace: bool = False,
                  cpus: int | None = 1, lane_cells: int | None = None, device: str | None = None,
                  trace_from: Sequence[float] | np.ndarray | None = None) -> list[Hit]:
    """Align many sequences (uint8 code arrays ``[L_k]``) to one profile; one :class:`Hit` per target, in
    input order. ``backtrace`` adds the alignment; ``cpus`` processes (``0``/``None`` = all cores).

    ``trace_from`` (with ``backtrace``): a score in bits per target; a target scoring below its value comes back
    with its score only, as without ``backtrace`` (a search traces only the targets that can be reported).
    The DP is the same; only the decoding of the paths is skipped. ``None``: every path is traced.

    ``device``: ``None`` runs the torch kernel on CUDA when ``torch.cuda.is_available()`` and the NumPy
    kernel otherwise; ``"numpy"`` forces NumPy; a torch device string (``"cpu"``, ``"cuda:0"``) runs the torch
    kernel there, in this process (``cpus`` is then ignored). Results are identical on every backend.
    ``lane_cells``: cells per DP row (default :data:`LANE_CELLS`, or ``TORCH_LANE_CELLS`` on CUDA).
    """
    scores = profile if isinstance(profile, SequenceScores) else sequence_scores(profile)
    checked = _check_targets(targets)
    if not checked:
        return []
    thresholds = None
    if trace_from is not None:
        thresholds = np.asarray(trace_from, dtype=np.float64)
        if thresholds.shape != (len(checked),) or np.isnan(thresholds).any():
            raise ValueError("trace_from must give one score (bits, not NaN) per target")
        # milli-bits, rounded down: a lane at or above its threshold is traced
        thresholds = np.floor(np.clip(thresholds, -2.0 ** 40, 2.0 ** 40) * SCALE).astype(np.int64)
    backend = resolve_device(device)
    if backend != NUMPY:
        return _align_torch(scores, checked, backtrace, backend, lane_cells)
    lane_cells = LANE_CELLS if lane_cells is None else lane_cells
    buckets = length_buckets([t.size for t in checked], scores.length, backtrace=backtrace, lane_cells=lane_cells)
    workers = resolve_cpus(cpus)
    if workers > 1 and len(buckets) < 4 * workers:
        buckets = _split_for_workers(buckets, 4 * workers)
    results = _run_seq([scores], checked, [(0, bucket, backtrace) for bucket in buckets], workers, thresholds)
    hits: list[Hit | None] = [None] * len(checked)
    for bucket_hits in results:
        for hit in bucket_hits:
            hits[hit.index] = hit
    return hits  # type: ignore[return-value]


def _align_torch(scores: SequenceScores, targets: list[np.ndarray], backtrace: bool, device: str,
                 lane_cells: int | None) -> list[Hit]:
    """All buckets through the torch kernel in this process (one device)."""
    gpu = device.startswith("cuda")
    if lane_cells is None:
        lane_cells = TORCH_LANE_CELLS if gpu else LANE_CELLS
    buckets = length_buckets([t.size for t in targets], scores.length, backtrace=backtrace, lane_cells=lane_cells,
                             max_lanes=TORCH_MAX_LANES if gpu else MAX_LANES,
                             backtrace_bytes=TORCH_BACKTRACE_BYTES if gpu else BACKTRACE_BYTES,
                             row_cost_cells=TORCH_ROW_COST_CELLS if gpu else ROW_COST_CELLS)
    hits: list[Hit | None] = [None] * len(targets)
    for bucket in buckets:
        for hit in align_lane_batch_torch(scores, targets, bucket, backtrace=backtrace, device=device):
            hits[hit.index] = hit
    return hits  # type: ignore[return-value]


QUERY_LENGTH_RATIO = 1.25
""":func:`pair_buckets` puts pairs whose profiles' lengths lie within this ratio of each other in one group."""


def pair_buckets(query_lengths: Sequence[int], target_lengths: Sequence[int], *, backtrace: bool,
                 lane_cells: int = TORCH_LANE_CELLS, max_lanes: int = TORCH_MAX_LANES,
                 backtrace_bytes: int = TORCH_BACKTRACE_BYTES,
                 row_cost_cells: float = TORCH_ROW_COST_CELLS) -> list[list[int]]:
    """Pair indices in buckets for the mixed-profile kernel: pairs grouped by profile length (each group's
    lengths within :data:`QUERY_LENGTH_RATIO`, so a bucket's rows, run to its longest profile, are mostly real),
    then by target length within each group as :func:`length_buckets` cuts them."""
    query_lengths, target_lengths = _paired_vectors(query_lengths, target_lengths, "query_lengths",
                                                    "target_lengths", np.int64)
    if query_lengths.size and int(query_lengths.min()) < 1:
        raise ValueError("every profile must have at least one column")
    groups = np.floor(np.log(np.maximum(query_lengths, 1)) / np.log(QUERY_LENGTH_RATIO)).astype(np.int64)
    buckets = []
    for group in np.unique(groups):
        members = np.flatnonzero(groups == group)
        for bucket in length_buckets(target_lengths[members].tolist(), int(query_lengths[members].max()),
                                     backtrace=backtrace, lane_cells=lane_cells, max_lanes=max_lanes,
                                     backtrace_bytes=backtrace_bytes, row_cost_cells=row_cost_cells):
            buckets.append(members[bucket].tolist())
    return buckets


def align_pairs(profiles: Sequence[Profile | SequenceScores], pair_profile: Sequence[int],
                targets: Sequence[np.ndarray], *, backtrace: bool = False, device: str | None = None,
                lane_cells: int | None = None) -> list[Hit]:
    """Align pair k = (``targets[k]``, ``profiles[pair_profile[k]]``) for every k; one :class:`Hit` per pair, in
    input order (``Hit.index`` = k). The same hits as :func:`align_targets` of each profile on its own targets.

    On a torch device (``device`` as in :func:`align_targets`; ``None`` = CUDA when available) the pairs of all
    profiles share buckets (:func:`pair_buckets`, :func:`~workflow_lib.aligner.torch_kernels.
    viterbi_mixed_lanes_torch`): a search hands the survivors of all its queries to the GPU in a few calls
    instead of one call per query. With NumPy each profile's pairs run as one :func:`align_targets` call in
    this process (mixed buckets did not pay on the CPU, measured)."""
    scores_list = [p if isinstance(p, SequenceScores) else sequence_scores(p) for p in profiles]
    checked = _check_targets(targets)
    pair_profile = np.asarray(pair_profile, dtype=np.int64)
    if pair_profile.shape != (len(checked),):
        raise ValueError("pair_profile must give one profile index per target")
    if pair_profile.size and not 0 <= int(pair_profile.min()) <= int(pair_profile.max()) < len(scores_list):
        raise ValueError("pair_profile must index profiles")
    hits: list[Hit | None] = [None] * len(checked)
    backend = resolve_device(device)
    if backend == NUMPY:
        for k in np.unique(pair_profile):
            members = np.flatnonzero(pair_profile == k)
            for member, hit in zip(members, align_targets(scores_list[k], [checked[m] for m in members],
                                                          backtrace=backtrace, cpus=1, device=NUMPY,
                                                          lane_cells=lane_cells)):
                hits[int(member)] = dataclasses.replace(hit, index=int(member))
        return hits  # type: ignore[return-value]
    gpu = backend.startswith("cuda")
    buckets = pair_buckets([scores_list[k].length for k in pair_profile], [t.size for t in checked],
                           backtrace=backtrace,
                           lane_cells=lane_cells or (TORCH_LANE_CELLS if gpu else LANE_CELLS),
                           max_lanes=TORCH_MAX_LANES if gpu else MAX_LANES,
                           backtrace_bytes=TORCH_BACKTRACE_BYTES if gpu else BACKTRACE_BYTES,
                           row_cost_cells=TORCH_ROW_COST_CELLS if gpu else ROW_COST_CELLS)
    for bucket in buckets:
        for hit in align_mixed_batch_torch(scores_list, pair_profile, checked, bucket, backtrace=backtrace,
                                           device=backend):
            hits[hit.index] = hit
    return hits  # type: ignore[return-value]


def _split_for_workers(buckets: list[list[int]], wanted: int) -> list[list[int]]:
    """Split the widest buckets until there are ``wanted`` pieces (or nothing left to split)."""
    pieces = [list(b) for b in buckets]
    while len(pieces) < wanted:
        widest = max(range(len(pieces)), key=lambda k: len(pieces[k]))
        if len(pieces[widest]) < 2 * MIN_LANES:
            break
        bucket = pieces.pop(widest)
        half = len(bucket) // 2
        pieces[widest:widest] = [bucket[:half], bucket[half:]]
    return pieces


def align_queries(profiles: Sequence[Profile], targets: Sequence[np.ndarray], *, backtrace: bool = False,
                  cpus: int | None = 1, lane_cells: int | None = None,
                  device: str | None = None) -> list[list[Hit]]:
    """Many queries against the same targets: ``result[q][k]`` is query q's hit on target k. Processes split
    the (query, bucket) tasks; ``device`` as in :func:`align_targets`."""
    checked = _check_targets(targets)
    scores_list = [sequence_scores(p) for p in profiles]
    backend = resolve_device(device)
    if backend != NUMPY:
        return [_align_torch(scores, checked, backtrace, backend, lane_cells) if checked else []
                for scores in scores_list]
    lane_cells = LANE_CELLS if lane_cells is None else lane_cells
    tasks = []
    for query_index, scores in enumerate(scores_list):
        for bucket in length_buckets([t.size for t in checked], scores.length, backtrace=backtrace,
                                     lane_cells=lane_cells):
            tasks.append((query_index, bucket, backtrace))
    results = _run_seq(scores_list, checked, tasks, resolve_cpus(cpus))
    out: list[list[Hit | None]] = [[None] * len(checked) for _ in profiles]
    for (query_index, _, _), bucket_hits in zip(tasks, results):
        for hit in bucket_hits:
            out[query_index][hit.index] = hit
    return out  # type: ignore[return-value]


def viterbi_seq_profile(profile: Profile | SequenceScores, target: str | np.ndarray, *,
                        backtrace: bool = True, device: str | None = None) -> Hit:
    """One sequence against one profile (a convenience wrapper of :func:`align_targets`)."""
    from workflow_lib.aligner.profile import encode_query
    return align_targets(profile, [encode_query(target)], backtrace=backtrace, cpus=1, device=device)[0]


def _hmm_task(args: tuple[int, list[int], float, bool]) -> list[Hit]:
    query_index, indices, shift, correlation = args
    query = _SHARED["queries"][query_index]
    templates = _SHARED["templates"]
    return align_template_batch(query, [templates[k] for k in indices], indices, shift=shift,
                                correlation=correlation)


def align_profiles(query: Profile, templates: Sequence[Profile], *, cpus: int | None = 1,
                   shift: float = HHSUITE_SHIFT, correlation: bool = True,
                   lane_cells: int = ALIGN_PROFILES_LANE_CELLS) -> list[Hit]:
    """Profile–profile Viterbi of one query against many template profiles (with pseudocounts already
    added, see :func:`~workflow_lib.aligner.profile.add_pseudocounts`); hits with alignments, input order.

    The query's null model is used for the column scores of every pair.
    """
    query_scores = pair_scores(query)
    template_scores = [pair_scores(t, query.background) for t in templates]
    if not template_scores:
        return []
    buckets = length_buckets([t.length for t in template_scores], query_scores.length, backtrace=True,
                             lane_cells=lane_cells)
    tasks = [(0, bucket, shift, correlation) for bucket in buckets]
    _SHARED["queries"], _SHARED["templates"] = [query_scores], template_scores
    try:
        workers = resolve_cpus(cpus)
        if workers <= 1 or len(tasks) <= 1:
            results = [_hmm_task(task) for task in tasks]
        else:
            with _pool(min(workers, len(tasks))) as pool:
                results = pool.map(_hmm_task, tasks, chunksize=1)
    finally:
        _SHARED.clear()
    hits: list[Hit | None] = [None] * len(template_scores)
    for bucket_hits in results:
        for hit in bucket_hits:
            hits[hit.index] = hit
    return hits  # type: ignore[return-value]


def viterbi_profile_profile(query: Profile, template: Profile, *, shift: float = HHSUITE_SHIFT,
                            correlation: bool = True) -> Hit:
    """One query profile against one template profile (local Viterbi, log-sum-of-odds, with backtrace)."""
    return align_profiles(query, [template], cpus=1, shift=shift, correlation=correlation)[0]


def pair_scores_for(query: Profile, template: Profile) -> tuple[PairScores, PairScores]:
    """The (query, template) score tables :func:`align_profiles` uses (for references and tests)."""
    return pair_scores(query), pair_scores(template, query.background)
