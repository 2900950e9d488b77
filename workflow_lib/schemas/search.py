"""The search and MSA stage: query profiles, hits, per-shard times, the iteration state, MSA statistics.

Files under ``{results}/{proteome}/search/chunk_NNNN/iter_I/``: ``queries.npz`` (:data:`SEARCH_QUERIES`),
``shard_NNN.hits.parquet`` (:data:`HITS`), ``shard_NNN.times.parquet`` (:data:`SEARCH_TIMES`),
``state.parquet`` (:data:`MSA_STATE`); ``{results}/{proteome}/msa/chunk_NNNN.stats.parquet``
(:data:`MSA_STATS`).
"""

from __future__ import annotations

import pyarrow as pa

from workflow_lib.schemas.io import ArraySpec, NpzSchema, TableSchema

HITS = TableSchema("hits", 2, pa.schema([
    ("query", pa.string()),
    ("target", pa.string()),
    ("evalue", pa.float64()),
    ("bitscore", pa.float32()),
    ("qstart", pa.int32()),          # 1-based, inclusive
    ("qend", pa.int32()),
    ("tstart", pa.int32()),
    ("tend", pa.int32()),
    ("qlen", pa.int32()),
    ("tlen", pa.int32()),
    ("identity", pa.float32()),      # identical / aligned columns
    ("aligned_cols", pa.int32()),
    ("alignment", pa.string()),      # state string: M (match), I (insert in target), D (deletion in target)
    ("iteration", pa.int16()),
    ("database", pa.string()),
    ("tseq", pa.string()),           # target residues tstart..tend (the aligned segment, for building A3M rows)
]), "Search hits: one row per query-target alignment.")


SEARCH_TIMES = TableSchema("search_times", 1, pa.schema([
    ("query", pa.string()),
    ("iteration", pa.int16()),
    ("shard", pa.int32()),
    ("seconds", pa.float64()),       # prefilter + Viterbi + calibration time of this query on this shard
    ("candidates", pa.int64()),      # targets with a seeded diagonal
    ("gapless", pa.int64()),         # passed the gapless stage
    ("gapped", pa.int64()),          # passed the gapped stage (aligned by Viterbi)
]), "Per query and shard: search time and prefilter counts.")


MSA_STATE = TableSchema("msa_state", 1, pa.schema([
    ("protein", pa.string()),        # FASTA ID
    ("safe_id", pa.string()),
    ("length", pa.int32()),
    ("iteration", pa.int16()),       # iteration that produced the current MSA (0: precomputed)
    ("converged", pa.bool_()),
    ("reason", pa.string()),         # why it stopped (empty while searching)
    ("depth", pa.int32()),           # sequences in the filtered MSA, query included
    ("included", pa.int32()),        # targets with E <= inclusion threshold in the last search
    ("neff", pa.float32()),
    ("coverage", pa.float32()),      # fraction of query columns covered by at least one other sequence
    ("seconds", pa.float64()),       # search time summed over shards and iterations
    ("a3m", pa.string()),            # file holding the current MSA
    ("source", pa.string()),         # search | precomputed
]), "Per protein: the state of its iterative MSA after an iteration (the workflow's hand-over between jobs).")


MSA_STATS = TableSchema("msa_stats", 1, pa.schema([
    ("protein", pa.string()),
    ("safe_id", pa.string()),
    ("length", pa.int32()),
    ("depth", pa.int32()),
    ("neff", pa.float32()),
    ("coverage", pa.float32()),
    ("mean_coverage", pa.float32()), # mean fraction of query columns covered per non-query sequence
    ("iterations", pa.int16()),
    ("reason", pa.string()),
    ("seconds", pa.float64()),
    ("source", pa.string()),
]), "Per protein: statistics of its final MSA.")


SEARCH_QUERIES = NpzSchema("search_queries", 2, {
    "protein": ArraySpec("int32", ("Q",), "index of the query in the chunk FASTA"),
    "length": ArraySpec("int32", ("Q",), "profile columns"),
    "sequence": ArraySpec("uint8", ("R",), "query residue codes, concatenated"),
    "emissions": ArraySpec("float32", ("R", 20)),
    "transitions": ArraySpec("float32", ("T", 7), "T = R + Q: a begin row per profile"),
    "column_neff": ArraySpec("float32", ("T", 3)),
    "neff": ArraySpec("float64", ("Q",)),
    "background": ArraySpec("float32", ("Q", 20)),
    "has_pseudocounts": ArraySpec("bool", ("Q",)),
    "mu": ArraySpec("float64", ("Q",), "Gumbel location of S - log2(Lt) - slope * log2(Lt / reference), bits"),
    "lam": ArraySpec("float64", ("Q",), "Gumbel scale, per bit"),
    "slope": ArraySpec("float64", ("Q",), "excess bits of the score per doubling of the target length"),
    "reference_length": ArraySpec("float64", ("Q",), "length of the calibration sequences"),
}, "calibrated query profiles of one chunk and iteration")
