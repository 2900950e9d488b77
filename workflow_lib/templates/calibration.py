"""E-values for template hits: the per-query extreme-value null model on shuffled profiles, which lives in
:mod:`workflow_lib.aligner.calibration` (the profile-database search uses it too); re-exported here under the
names the template search has always used."""

from __future__ import annotations

from workflow_lib.aligner.calibration import (DEFAULT_DECOYS, LAMBDA_RANGE, MIN_DECOYS, NullModel, decoy_profiles,
                                              decoy_scores, fit_decoys, fit_gumbel, fit_null, shuffled_profile)

__all__ = ["DEFAULT_DECOYS", "LAMBDA_RANGE", "MIN_DECOYS", "NullModel", "decoy_profiles", "decoy_scores",
           "fit_decoys", "fit_gumbel", "fit_null", "shuffled_profile"]
