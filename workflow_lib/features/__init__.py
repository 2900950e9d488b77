"""Per-protein network input features: MSA features, co-evolution, and the feature-file layout.

The MSA (query first) and what RoseTTAFold's network reads from it (Baek et al. 2021, Science 373:871), with
sequence weights that down-weight near-identical rows; DESIGN.md, "Features and the model".

- :mod:`.msa_features` -- :func:`msa_features`: deterministic row sampling (:func:`sample_rows`), MSA tokens,
  deletions, :func:`sequence_weights` (80% identity) and Neff, :func:`weighted_profile`.
- :mod:`.coevolution` -- :func:`coevolution_features`: APC-corrected covariance norm and mutual information
  from weighted pair frequencies, in memory-bounded blocks; :func:`apc`.
- :mod:`.couplings` -- :func:`coupling_features`: direct couplings, a ridge-regularised inverse covariance
  through the Woodbury identity (mean-field DCA family), APC-corrected; the third co-evolution channel.
- :mod:`.compiled` -- numba twins of the weights' neighbour counts, the pair statistics and the couplings' Gram
  and projection (NumPy is the fallback, with the same results; ``TRACKFOLD_KERNELS=numpy`` forces it).
- :mod:`.templates` -- :func:`template_features`: template hits -> the aligned template atoms and 1D scores on the
  query grid.
- :mod:`.template_maps` -- the template keys of a feature file in either layout: :func:`template_pair` (the 6D
  one-hots of the columns a network call reads, made from the atoms), :func:`template_distance_bins`,
  :func:`template_ca`.
- :mod:`.build` -- :func:`build_features` (A3M [+ template hits] -> validated dict), :func:`write_features`,
  :func:`read_features`.
- :mod:`.cli` -- ``trackfold features --out-dir DIR [--max-seqs N] [--templates DIR --template-hits HITS] A3M...``.

The feature file's layout (keys, dtypes, named dims N, L, T; the template channel layouts) is
:mod:`workflow_lib.schemas.features`.
"""

from workflow_lib.features.build import build_features, read_features, write_features
from workflow_lib.features.coevolution import apc, coevolution_features, raw_coevolution
from workflow_lib.features.couplings import coupling_features
from workflow_lib.features.msa_features import (
    DEFAULT_MAX_SEQS,
    DEFAULT_MAX_STATS_SEQS,
    msa_features,
    sample_rows,
    sampling_order,
    sequence_weights,
    weighted_profile,
)
from workflow_lib.features.templates import DEFAULT_MAX_TEMPLATES, read_hits, template_features

__all__ = [
    "DEFAULT_MAX_SEQS", "DEFAULT_MAX_STATS_SEQS", "DEFAULT_MAX_TEMPLATES", "apc", "build_features",
    "coevolution_features", "coupling_features", "msa_features", "raw_coevolution", "read_features", "read_hits",
    "sample_rows",
    "sampling_order", "sequence_weights", "template_features", "weighted_profile",
    "write_features",
]
