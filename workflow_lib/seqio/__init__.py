"""Sequences and formats: the residue alphabet, FASTA/A3M/Stockholm parsing, atomic writers."""
