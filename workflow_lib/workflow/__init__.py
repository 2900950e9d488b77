"""Glue between the Snakemake rules and the library: typed stage configuration."""
