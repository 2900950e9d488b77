"""Sequence databases and proteome chunks: the shard table, its k-mer index, the chunk plan.

Files: ``{results}/db/{database}/shard_NNN.parquet`` (:data:`SHARD`), ``shard_NNN.kmer.npz``
(:data:`KMER_INDEX`), ``{results}/{proteome}/chunks/chunks.parquet`` (:data:`CHUNKS`); a profile database
``{results}/db/{database}.profiles/``: ``profiles_NNN.npz`` (:data:`PROFILE_DB_ARRAYS`), ``members_NNN.parquet``
(:data:`PROFILE_DB_MEMBERS`) and ``index_NNN.npz`` (:data:`KMER_INDEX`).
"""

from __future__ import annotations

import pyarrow as pa

from workflow_lib.schemas.io import ArraySpec, NpzSchema, TableSchema

SHARD = TableSchema("db_shard", 1, pa.schema([
    ("id", pa.string()),
    ("description", pa.string()),
    ("sequence", pa.binary()),       # uint8 residue codes (workflow_lib.seqio.alphabet)
    ("length", pa.int32()),
]), "One database shard: sequences as residue codes, in database order.")


CHUNKS = TableSchema("chunks", 1, pa.schema([
    ("proteome", pa.string()),
    ("chunk", pa.int32()),
    ("protein", pa.string()),        # ID as in the FASTA (first word of the header)
    ("safe_id", pa.string()),        # file-name-safe ID used in every output path
    ("length", pa.int32()),
    ("index", pa.int32()),           # position of the protein in its FASTA file
    ("note", pa.string()),           # empty, or why the protein is in no chunk (chunk = -1)
]), "Proteins of one proteome and the length-balanced chunk each belongs to (-1: skipped, see note).")


KMER_INDEX = NpzSchema("kmer_index", 1, {
    "k": ArraySpec("int32", ()),
    "offsets": ArraySpec("int64", ("C1",), "start of each code's entries; C1 = 20**k + 1"),
    "sequence": ArraySpec("uint32", ("E",), "sequence index within the shard"),
    "position": ArraySpec("uint32", ("E",), "0-based start of the k-mer's window in its sequence"),
    "shape": ArraySpec("int32", ("K",), "window offsets of the shape's 1 positions (absent: 0 .. k-1)",
                       optional=True),
}, "k-mer index of one database shard")


PROFILE_DB_ARRAYS = NpzSchema("profile_db_arrays", 1, {
    "residues": ArraySpec("uint8", ("P",), "representative sequences, concatenated (residue codes)"),
    "offsets": ArraySpec("int64", ("C1",), "start of each cluster's columns; C1 = clusters + 1"),
    "members": ArraySpec("int32", ("C",), "member sequences of each cluster, the representative included"),
}, "Cluster representatives of one profile-database shard (workflow_lib.db.profiles).")

PROFILE_DB_MEMBERS = TableSchema("profile_db_members", 1, pa.schema([
    ("cluster", pa.int32()),         # cluster index within the shard
    ("id", pa.string()),             # member ID as in the sequence database
    ("description", pa.string()),
    ("row", pa.string()),            # A3M row against the representative (the representative: its sequence)
    ("start", pa.int32()),           # member residue (0-based) where the row's aligned segment begins
    ("length", pa.int32()),          # the member's whole length
]), "Members of the clusters of one profile-database shard, representative first (workflow_lib.db.profiles).")
