"""Sub-command ``trackfold align``: align a query (sequence, MSA or ``.hhm``) to sequences or profiles.

``--mode seq`` (default): TARGETS are FASTA files; each sequence is aligned to the query profile with the
sequence–profile Viterbi. ``--mode profile``: TARGETS are ``.hhm`` files or directories of them; the query
profile is aligned to each with the profile–profile Viterbi. Output: one TSV row per target, best first
(coordinates 1-based, inclusive), to stdout or ``--out``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workflow_lib.aligner.hhm import read_hhm
from workflow_lib.aligner.lanes import align_profiles, align_targets
from workflow_lib.aligner.profile import Profile, add_pseudocounts, profile_from_alignment, profile_from_sequence
from workflow_lib.aligner.render import aligned_strings
from workflow_lib.aligner.scores import Hit
from workflow_lib.errors import InputError
from workflow_lib.seqio.alphabet import encode
from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.seqio.fasta import iter_fasta, read_fasta
from workflow_lib.seqio.msa import read_alignment

COLUMNS = ("target", "score", "qstart", "qend", "tstart", "tend", "aligned_columns", "query_aligned",
           "target_aligned")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("align", help="align a query (FASTA, A3M/Stockholm or .hhm) to sequences or "
                                                 "profiles with the Viterbi kernels")
    parser.add_argument("query", help="query: FASTA sequence, MSA (A3M, aligned FASTA, Stockholm) or .hhm")
    parser.add_argument("targets", nargs="+", help="FASTA files (--mode seq) or .hhm files / directories "
                                                   "(--mode profile)")
    parser.add_argument("--out", help="write a TSV here instead of printing it")
    parser.add_argument("--mode", choices=("seq", "profile"), default="seq",
                        help="sequence–profile (seq, default) or profile–profile (profile)")
    parser.add_argument("--cpus", type=int, default=1, help="processes (0 = all cores; default 1)")
    parser.add_argument("--device", default=None,
                        help="--mode seq backend: numpy, or a torch device (cpu, cuda, cuda:1); default: CUDA "
                             "when torch sees a GPU, else numpy")
    parser.add_argument("--top", type=int, default=0, help="report the N best targets (default 0 = all)")
    parser.set_defaults(handler=run_align)


def load_query(path: str | Path) -> Profile:
    """A profile with pseudocounts from a ``.hhm``, an MSA, or a FASTA file (its first record)."""
    path = Path(path)
    if path.name.endswith((".hhm", ".hhm.gz")):
        return add_pseudocounts(read_hhm(path))
    try:
        alignment = read_alignment(path)
    except InputError:
        records = read_fasta(path)
        return profile_from_sequence(records[0].sequence, name=records[0].id, description=records[0].description)
    if alignment.depth == 1:
        return profile_from_sequence(alignment.query, name=alignment.names[0],
                                     description=alignment.descriptions[0])
    return profile_from_alignment(alignment)


def _hhm_paths(targets: list[str]) -> list[Path]:
    paths: list[Path] = []
    for target in targets:
        path = Path(target)
        if path.is_dir():
            paths.extend(sorted(p for p in path.iterdir() if p.name.endswith((".hhm", ".hhm.gz"))))
        elif path.exists():
            paths.append(path)
        else:
            raise InputError("no such file or directory", path=path)
    if not paths:
        raise InputError("no .hhm profiles among the targets", path=targets[0])
    return paths


def _rows(hits: list[Hit], names: list[str], query: str, sequences: list[str], mode: str, top: int) -> list[str]:
    ranked = sorted(hits, key=lambda hit: (-hit.score, hit.index))
    if top > 0:
        ranked = ranked[:top]
    rows = ["\t".join(COLUMNS)]
    for hit in ranked:
        query_row, target_row = aligned_strings(hit, query, sequences[hit.index], mode=mode)
        rows.append("\t".join([names[hit.index], f"{hit.score:.2f}", str(hit.query_start + 1), str(hit.query_end),
                               str(hit.target_start + 1), str(hit.target_end), str(hit.aligned_columns),
                               query_row, target_row]))
    return rows


def run_align(args: argparse.Namespace) -> int:
    if args.top < 0:
        raise InputError("--top must be >= 0")
    if args.cpus < 0:
        raise InputError("--cpus must be >= 0")
    query = load_query(args.query)
    if args.mode == "seq":
        names, sequences = [], []
        for path in args.targets:
            for record in iter_fasta(path, allow_duplicates=True):
                names.append(record.id)
                sequences.append(record.sequence)
        hits = align_targets(query, [encode(s) for s in sequences], backtrace=True, cpus=args.cpus,
                             device=args.device)
    else:
        profiles = [add_pseudocounts(read_hhm(path)) for path in _hhm_paths(args.targets)]
        names = [p.name for p in profiles]
        sequences = [p.query for p in profiles]
        hits = align_profiles(query, profiles, cpus=args.cpus)
    text = "\n".join(_rows(hits, names, query.query, sequences, args.mode, args.top)) + "\n"
    if args.out:
        write_text_atomic(args.out, text)
    else:
        sys.stdout.write(text)
    return 0
