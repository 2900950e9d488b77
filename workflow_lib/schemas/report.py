"""The report stage's tables: ``{results}/{proteome}/summary.parquet`` and ``runtime.parquet``.

``summary`` has one row per protein of a proteome, in FASTA order, skipped proteins included (``chunk`` -1 and
the reason in ``note``). Columns of a stage that is not part of the run are null. Runtime columns are seconds
of wall time from Snakemake ``benchmark:`` files: a per-protein job's own time, or a per-chunk job's time
shared among the chunk's proteins in proportion to their length (the jobs' cost grows with residues); where no
benchmark file covers the MSA stage, ``seconds_msa`` is the search time the MSA statistics report.
``runtime`` has one row per benchmarked job (any rule) whose output belongs to the proteome, or to no
proteome (the database build), so the runtime plot picks up new rules without changes.
"""

from __future__ import annotations

import pyarrow as pa

from workflow_lib.schemas.io import TableSchema

STAGES = ("chunks", "msa", "templates", "features", "predict")
"""Stages of the per-protein runtime columns; :func:`workflow_lib.report.collect.stage_of_rule` maps rules."""

SUMMARY = TableSchema("summary", 1, pa.schema([
    ("proteome", pa.string()),
    ("protein", pa.string()),                    # ID as in the FASTA
    ("safe_id", pa.string()),                    # the {protein} of every output path
    ("length", pa.int32()),
    ("chunk", pa.int32()),                       # -1: skipped (see note)
    ("note", pa.string()),                       # why the protein was skipped, else empty
    ("msa_depth", pa.int32()),                   # sequences in the final MSA (query included)
    ("msa_neff", pa.float32()),                  # effective number of sequences
    ("msa_coverage", pa.float32()),              # as reported by the MSA stage
    ("msa_iterations", pa.int16()),
    ("top_template", pa.string()),               # rank-1 template hit
    ("top_template_probability", pa.float32()),  # its significance, exp(-E-value)
    ("top_template_evalue", pa.float64()),
    ("mean_plddt", pa.float32()),                # mean predicted lDDT over residues (0-100)
    ("fraction_plddt_over_70", pa.float32()),    # share of residues with pLDDT > 70
] + [(f"seconds_{stage}", pa.float32()) for stage in STAGES]),
    "One row per protein of a proteome: MSA depth/Neff/coverage, top template, pLDDT, runtime per stage "
    "(workflow_lib.schemas.report).")

RUNTIME = TableSchema("runtime", 1, pa.schema([
    ("rule", pa.string()),                       # the Snakemake rule (folder under results/benchmarks/)
    ("stage", pa.string()),                      # one of STAGES, 'database', 'report' or 'other'
    ("job", pa.string()),                        # benchmark file path below results/benchmarks/{rule}/
    ("seconds", pa.float32()),                   # wall time
    ("max_rss_mb", pa.float32()),                # peak resident memory (null when not measured)
    ("cpu_seconds", pa.float32()),
]), "One row per benchmarked job of a proteome (workflow_lib.schemas.report).")
