"""trackfold's library: proteome FASTA to MSAs, templates, features and three-track structure predictions.

Subpackages, one per stage family:

- :mod:`workflow_lib.seqio` -- residue alphabet, FASTA/A3M/Stockholm parsing, table and array schemas.
- :mod:`workflow_lib.db` -- sharded sequence databases and proteome chunking.
- :mod:`workflow_lib.aligner` -- substitution data, profile HMMs and Viterbi kernels.
- :mod:`workflow_lib.workflow` -- typed stage configuration shared by the CLI and the Snakemake rules.
"""

__version__ = "0.1.0"
