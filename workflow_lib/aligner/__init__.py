"""The HMM aligner: substitution data, profile HMMs, ``.hhm`` I/O and the lane-vectorised Viterbi kernels.

Profile HMMs and their HMM–HMM comparison as in HHsearch (Söding 2005, Bioinformatics 21:951), pseudocounts
after PSI-BLAST (Altschul et al. 1997, Nucleic Acids Res. 25:3389), and Viterbi over several targets at once as in
HH-suite3 (Steinegger et al. 2019, BMC Bioinformatics 20:473). Main API:

- :class:`Profile`, :func:`profile_from_sequence`, :func:`profile_from_alignment`, :func:`add_pseudocounts`;
- :func:`read_hhm`, :func:`write_hhm` (HH-suite text profiles);
- :func:`align_targets` (one profile, many encoded sequences, optional alignments, ``cpus=``),
  :func:`align_queries`, :func:`align_pairs` (many profiles, each with its own targets: on a GPU in shared
  buckets), :func:`viterbi_seq_profile` (one pair);
- :func:`align_profiles`, :func:`viterbi_profile_profile` (profile–profile, log-sum-of-odds);
- :class:`Hit` (score, coordinates, states, aligned pairs).
"""

from workflow_lib.aligner.hhm import read_hhm, write_hhm
from workflow_lib.aligner.lanes import (align_pairs, align_profiles, align_queries, align_targets,
                                        viterbi_profile_profile, viterbi_seq_profile)
from workflow_lib.aligner.profile import Profile, add_pseudocounts, profile_from_alignment, profile_from_sequence
from workflow_lib.aligner.scores import Hit

__all__ = ["Hit", "Profile", "add_pseudocounts", "align_pairs", "align_profiles", "align_queries", "align_targets",
           "profile_from_alignment", "profile_from_sequence", "read_hhm", "viterbi_profile_profile",
           "viterbi_seq_profile", "write_hhm"]
