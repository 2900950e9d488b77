"""trackfold's library: proteome FASTA to MSAs, templates, features and three-track structure predictions.

The map of the library, one subpackage per stage family, in the order the data flows through them
(docs/architecture.md lists their modules; dependencies point one way, from the application packages down to
the data contracts):

- :mod:`workflow_lib.errors` -- the exception hierarchy: bad user data is an ``InputError`` naming file and record.
- :mod:`workflow_lib.schemas` -- every Parquet table and npz layout the workflow writes, the one validating reader
  and atomic writer, and the index of every file the workflow writes.
- :mod:`workflow_lib.seqio` -- residue alphabet, FASTA (with the input policy) and A3M/Stockholm parsing, atomic
  files, per-protein receipts.
- :mod:`workflow_lib.db` -- sharded sequence databases with their k-mer seed indexes, profile databases of
  clustered sequences, length-balanced proteome chunks.
- :mod:`workflow_lib.aligner` -- substitution data, profile HMMs and their pseudocounts, ``.hhm`` and HMMER3
  profile files, the Viterbi kernels (NumPy, numba, torch, Triton) and profile–profile E-values.
- :mod:`workflow_lib.search` -- the iterative HHblits-style search: settings, prefilter, E-values, search engine,
  MSA assembly, the Python API and the workflow's search jobs.
- :mod:`workflow_lib.templates` -- the template database, HMM-HMM template search and its E-values.
- :mod:`workflow_lib.structure` -- PDB/mmCIF reading and writing, backbone archives, virtual Cβ, 6D geometry,
  DSSP, lDDT and TM-score.
- :mod:`workflow_lib.features` -- per-protein network inputs: MSA features, co-evolution, direct couplings,
  template features, the feature file.
- :mod:`workflow_lib.model` -- the three-track network only: embeddings, the MSA, pair and structure tracks,
  heads, presets and the checkpoint file.
- :mod:`workflow_lib.training` -- training data and packs, crops, losses, the training loop, validation and the
  model card.
- :mod:`workflow_lib.inference` -- ``trackfold predict``: network runs, crop and stitch, folding from the
  distogram, pLDDT and its calibration, the output files.
- :mod:`workflow_lib.evaluate` -- predictions against native structures: lDDT-Cα, TM-score and RMSD, pLDDT
  calibration, contact precision.
- :mod:`workflow_lib.report` -- per-proteome summaries, plots, the HTML report, result comparison and progress
  logging.
- :mod:`workflow_lib.workflow` -- the glue for the Snakemake rules: the typed configuration, the workflow's paths,
  the rules' input functions and the training workflow's plan.
- :mod:`workflow_lib.cli` -- the ``trackfold`` command, assembled from each family's ``cli`` module (shared
  argument helpers: :mod:`workflow_lib.cli_args`).

``workflow_lib/data`` holds the shipped context-pseudocount weights and calibration decoys, each with its
provenance.
"""

__version__ = "0.1.0"
