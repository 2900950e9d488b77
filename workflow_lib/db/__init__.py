"""Sequence databases (FASTA → Parquet shards + manifest) and proteome chunking."""
