"""Sub-commands ``trackfold validate`` (check FASTA input) and ``trackfold convert`` (MSA formats)."""

from __future__ import annotations

import argparse

from workflow_lib.errors import InputError
from workflow_lib.seqio.fasta import read_fasta
from workflow_lib.seqio.msa import read_alignment, write_a3m, write_aligned_fasta

MSA_WRITERS = {"a3m": write_a3m, "afa": write_aligned_fasta}


def register(subparsers: argparse._SubParsersAction) -> None:
    validate = subparsers.add_parser("validate", help="check protein FASTA files against the input policy")
    validate.add_argument("fasta", nargs="+", help="FASTA files (plain or .gz)")
    validate.set_defaults(handler=run_validate)

    convert = subparsers.add_parser("convert", help="convert an MSA (A3M, aligned FASTA, Stockholm)")
    convert.add_argument("input", help="A3M, aligned FASTA or Stockholm (format detected from content)")
    convert.add_argument("output", help="output file")
    convert.add_argument("--to", choices=sorted(MSA_WRITERS), default="a3m", help="output format (default a3m)")
    convert.set_defaults(handler=run_convert)


def run_validate(args: argparse.Namespace) -> int:
    failed = 0
    for path in args.fasta:
        try:
            records = read_fasta(path)
        except InputError as error:
            print(f"FAIL {error}")
            failed += 1
            continue
        residues = sum(len(r) for r in records)
        renamed = sum(r.id != r.safe_id for r in records)
        print(f"OK   {path}: {len(records)} proteins, {residues} residues, {renamed} IDs given safe file names")
    return 2 if failed else 0


def run_convert(args: argparse.Namespace) -> int:
    alignment = read_alignment(args.input)
    MSA_WRITERS[args.to](args.output, alignment)
    print(f"{args.output}: {alignment.depth} sequences, {alignment.length} match columns")
    return 0
