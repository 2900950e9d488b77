"""Score-only profile–profile Viterbi for searching many profiles (the HMM–HMM Viterbi of HHsearch, Söding 2005,
Bioinformatics 21:951; several profiles at once as in HH-suite3, Steinegger et al. 2019, BMC Bioinformatics
20:473).

A profile database search scores a query against hundreds of candidate and decoy profiles and traces the path
of only the few it reports. :func:`hmm_scores` gives the best local Viterbi score (milli-bits, the ``raw_score``
of :func:`workflow_lib.aligner.align_profiles`, without the correlation score) of one query against many
profiles: compiled (:mod:`workflow_lib.aligner.hmm_kernels`) in batches of :data:`MAX_STACKED_CELLS` column
scores; without numba (or with ``TRACKFOLD_KERNELS=numpy``) the NumPy lane kernel gives the same scores.
"""

from __future__ import annotations

import numpy as np

from workflow_lib.aligner.device import compiled_available
from workflow_lib.aligner.hmm_kernels import MAX_STACKED_CELLS, kernel, stacked_inputs
from workflow_lib.aligner.profile import Profile
from workflow_lib.aligner.scores import HHSUITE_SHIFT, PairScores, pair_scores

def _numpy_scores(query: PairScores, templates: list[PairScores], shift: float) -> np.ndarray:
    """The NumPy lane kernel's best scores, templates in the length buckets :func:`align_profiles` uses."""
    from workflow_lib.aligner.lanes import ALIGN_PROFILES_LANE_CELLS, length_buckets
    from workflow_lib.aligner.viterbi_hmm import viterbi_profile_lanes
    out = np.empty(len(templates), np.int64)
    for bucket in length_buckets([t.length for t in templates], query.length, backtrace=True,
                                 lane_cells=ALIGN_PROFILES_LANE_CELLS):
        out[bucket] = viterbi_profile_lanes(query, [templates[k] for k in bucket], shift=shift)[0]
    return out


def hmm_scores(query: Profile, templates: list[Profile | PairScores], *, shift: float = HHSUITE_SHIFT) -> np.ndarray:
    """int64 ``[len(templates)]``: the best local profile–profile Viterbi score of ``query`` against each
    template, milli-bits (no correlation score; the query's null model, as :func:`align_profiles` uses).
    A template given as :class:`PairScores` must have been made with the query's background
    (:func:`~workflow_lib.aligner.scores.pair_scores`): a search keeps them across queries."""
    if not templates:
        return np.zeros(0, np.int64)
    query_scores = pair_scores(query)
    template_scores = [t if isinstance(t, PairScores) else pair_scores(t, query.background) for t in templates]
    if not compiled_available():
        return _numpy_scores(query_scores, template_scores, shift)
    score_kernel = kernel()
    qtr = query_scores.transitions.astype(np.int64)
    out = np.empty(len(templates), np.int64)
    no_trace, unused = np.zeros((1, 1, 1), np.uint8), np.zeros(len(templates), np.int64)
    per_batch = max(1, MAX_STACKED_CELLS // max(query_scores.length, 1))
    start = 0
    while start < len(templates):
        stop, cells = start, 0
        while stop < len(templates) and (stop == start or cells + template_scores[stop].length <= per_batch):
            cells += template_scores[stop].length
            stop += 1
        S, codes, starts, lengths, ttr, tstarts = stacked_inputs(query_scores, template_scores[start:stop], shift)
        score_kernel(S, codes, starts, lengths, qtr, ttr, tstarts, no_trace, out[start:stop], unused, unused)
        start = stop
    return out
