"""Composition-bias correction of Viterbi scores (HMMER's "null2" model, applied to one Viterbi alignment).

The Gumbel calibration (:mod:`workflow_lib.search.evalue`) scores the query profile against i.i.d. sequences drawn from
the background ``f(a)``. Real sequences are not i.i.d.: a low-complexity or compositionally biased region
(Ala/Lys/Pro-rich, Gly/Ser-rich, coiled coils) scores high against any profile built from a query with the same bias,
and its E-value is far too small. The HHblits prefilter and Viterbi (Remmert et al. 2012, Nat. Methods 9:173) do not
correct for this by themselves; HHblits handles it with composition-corrected column scores and HMMER with a second null
model. We use HMMER's (Eddy 2008, *PLoS Comput Biol* 4:e1000069; HMMER 3 user guide, "bias" column):

1. the alternative null model of a hit is the **mean emission distribution of the profile columns it aligns**,
   ``f2(a) = mean_i q_i(a)`` over the hit's match columns (HMMER averages posterior-weighted emissions over the
   domain envelope; with one Viterbi path the match columns are the envelope);
2. its score is ``null2 = Σ_j log2(f2(x_j) / f(x_j))`` over the target residues from the hit's first to last
   aligned residue (unknown residues add 0);
3. it enters with prior weight ``ω = 1/256``: ``bias = log2(1 + ω · 2^null2)`` bits, subtracted from the
   Viterbi score before the E-value. A hit of typical composition has ``null2`` of a few bits and loses almost
   nothing; a biased region whose composition matches the profile's loses ``≈ null2 − 8`` bits.

Random calibration sequences have ``null2 ≈ 0``, so the Gumbel fit is unchanged and the corrected score keeps
its calibration. Measured on the Pfam benchmark: benchmarks/RESULTS.md ("Homology search: peers").
"""

from __future__ import annotations

import numpy as np

NULL2_OMEGA_BITS = -8.0
"""log2 of HMMER's prior probability of the biased null model (ω = 1/256)."""


def composition_bias_bits(emissions: np.ndarray, background: np.ndarray, target: np.ndarray,
                          pairs: np.ndarray) -> float:
    """Bits to subtract from the Viterbi score of one hit (see the module docstring).

    ``emissions`` ``[L, 20]`` and ``background`` ``[20]`` of the query profile, ``target`` the target's residue
    codes (20 = X), ``pairs`` int ``[n, 2]`` the hit's matched (query column, target position) pairs.
    """
    pairs = np.asarray(pairs)
    if pairs.size == 0:
        return 0.0
    background = np.asarray(background, np.float64)
    alternative = np.asarray(emissions, np.float64)[pairs[:, 0]].mean(axis=0)
    alternative = alternative / alternative.sum()
    segment = np.asarray(target)[int(pairs[:, 1].min()):int(pairs[:, 1].max()) + 1]
    segment = segment[segment < background.size]
    log_ratio = np.log2(np.maximum(alternative, 1e-30) / background)
    null2 = float(log_ratio[segment].sum())
    return float(np.logaddexp2(0.0, NULL2_OMEGA_BITS + null2))
