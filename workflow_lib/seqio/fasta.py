"""FASTA reading and writing with the documented input policy for real-world proteomes.

Policy (also in docs/outputs.md, "Input FASTA policy"):

- plain or gzip-compressed files (detected by content, not by name);
- the record ID is the first word of the header; the rest is the description;
- lower case is upper-cased; U→C, O→K, B/Z/J→X (see :mod:`workflow_lib.seqio.alphabet`); one trailing ``*``
  (a translated stop codon) is dropped;
- these are :class:`~workflow_lib.errors.InputError` naming the file, the record and the position:
  a file that is not FASTA, a file without records, an empty record, an empty ID, a duplicate ID, digits,
  spaces, internal ``*`` or any other non-residue character inside a sequence, and (optionally) a record
  that is nucleotide sequence rather than protein (:func:`looks_nucleotide`: judged by length and
  composition, so short or low-complexity proteins such as the A/T-only antifreeze glycoproteins pass);
- a caller that must not stop on one bad record (a database build) passes ``on_bad_record``: each record-level
  problem is handed over as a :class:`BadRecord` and the record is skipped; file-level problems still raise;
- IDs that are unsafe as file names are given a safe name (:func:`safe_name`); the mapping is kept in every
  record (``Record.safe_id``) and in the chunk tables, so outputs can always be traced back.

The parser is our own, line by line, rather than Biopython's ``SimpleFastaParser``: Biopython silently deletes
spaces inside sequences and cannot report line numbers, and both are part of the policy above.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from workflow_lib.errors import InputError
from workflow_lib.seqio.alphabet import first_invalid, normalize_residues
from workflow_lib.seqio.atomic import atomic_path

NUCLEOTIDE_LETTERS = frozenset("ACGTUN")
MIN_NUCLEOTIDE_CHECK_LENGTH = 20
"""Records shorter than this are never taken for nucleotide input."""
MIN_NUCLEOTIDE_BASES = 3
"""Distinct bases (A, C, G, T/U) a nucleotide record shows: a protein of a few of these amino acids (the
antifreeze glycoprotein P02732 is only A and T) is not DNA, while any real coding sequence of 20 or more
nucleotides has at least three of the four bases."""


def looks_nucleotide(sequence: str) -> bool:
    """``sequence`` (normalised, upper case) is nucleotide rather than protein: at least
    :data:`MIN_NUCLEOTIDE_CHECK_LENGTH` letters, all of them A, C, G, T, U or N, with at least
    :data:`MIN_NUCLEOTIDE_BASES` distinct bases (T and U count as one)."""
    if len(sequence) < MIN_NUCLEOTIDE_CHECK_LENGTH:
        return False
    letters = set(sequence)
    if not letters <= NUCLEOTIDE_LETTERS:
        return False
    return len({"T" if letter == "U" else letter for letter in letters} - {"N"}) >= MIN_NUCLEOTIDE_BASES


@dataclass(frozen=True, slots=True)
class BadRecord:
    """A record that breaks the policy: where it is and why (``record`` is empty when the header has no ID)."""

    path: str
    record: str
    line: int
    reason: str

_SAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
MAX_SAFE_LENGTH = 80


@dataclass(frozen=True, slots=True)
class Record:
    """One protein: ``id`` as in the file, ``safe_id`` usable as a file name, normalised ``sequence``."""

    id: str
    description: str
    sequence: str
    safe_id: str

    def __len__(self) -> int:
        return len(self.sequence)


def safe_name(identifier: str, *, hashed: bool = False) -> str:
    """A file-name-safe form of ``identifier`` (unchanged when it is safe already).

    Runs of characters outside ``[A-Za-z0-9._-]`` become ``_`` (``sp|P0A7Y4|RNH_ECOLI`` → ``sp_P0A7Y4_RNH_ECOLI``);
    a leading ``.`` or ``-`` gets a ``_`` prefix. Names over 80 characters are cut, and then (or when
    ``hashed``, which :func:`iter_fasta` asks for when two IDs of a file would collide) 8 hex digits of the
    SHA-1 of the original ID are appended, so distinct IDs never share a file name.
    """
    cleaned = _SAFE_CHARS.sub("_", identifier)
    if cleaned[:1] in {".", "-"}:
        cleaned = "_" + cleaned
    if not hashed and len(cleaned) <= MAX_SAFE_LENGTH:
        return cleaned
    digest = hashlib.sha1(identifier.encode("utf-8")).hexdigest()[:8]
    return f"{cleaned[:MAX_SAFE_LENGTH]}_{digest}"


def open_text(path: str | Path) -> io.TextIOBase:
    """Open a plain or gzip text file (by magic bytes); a missing file is an InputError naming it."""
    path = Path(path)
    try:
        with open(path, "rb") as probe:
            magic = probe.read(2)
    except FileNotFoundError:
        raise InputError("file does not exist", path=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", path=path) from None
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def _raw_records(path: Path) -> Iterator[tuple[str, list[str], int]]:
    """Yield (header, sequence lines, header line number) exactly as written."""
    header: str | None = None
    lines: list[str] = []
    header_line = 0
    try:
        with open_text(path) as handle:
            for number, line in enumerate(handle, start=1):
                line = line.rstrip("\r\n")
                if line.startswith(">"):
                    if header is not None:
                        yield header, lines, header_line
                    header, lines, header_line = line[1:], [], number
                elif header is None:
                    if line.strip() == "" or line.startswith(";"):
                        continue
                    raise InputError(f"not a FASTA file (line {number} does not start with '>': "
                                     f"{line[:40]!r})", path=path)
                else:
                    lines.append(line)
    except (gzip.BadGzipFile, EOFError, OSError) as error:
        if isinstance(error, InputError):
            raise
        raise InputError(f"cannot be read as (gzipped) text: {error}", path=path) from None
    if header is not None:
        yield header, lines, header_line


def iter_fasta(path: str | Path, *, check_nucleotide: bool = True, allow_duplicates: bool = False,
               on_bad_record: Callable[[BadRecord], None] | None = None, safe_ids: bool = True) -> Iterator[Record]:
    """Validate and yield the records of a protein FASTA file in file order (see the module's policy).

    Duplicate IDs are an error unless ``allow_duplicates`` (databases decide themselves what to do with
    them, see :mod:`workflow_lib.db.build`). Raises InputError on the first problem, unless ``on_bad_record``
    is given: then a bad record (no ID, a character that is not a residue, an empty or a nucleotide sequence,
    a duplicate ID) is passed to it as a :class:`BadRecord` and skipped. ``safe_ids=False`` leaves
    ``Record.safe_id`` empty: a database build names no file after a record, and then keeps nothing per record
    (with ``allow_duplicates``), so a file of any size streams in constant memory.
    """
    path = Path(path)
    seen: dict[str, int] = {}
    safe_seen: dict[str, str] = {}
    count = skipped = 0
    for header, lines, line_no in _raw_records(path):
        try:
            identifier, description, sequence = _checked_record(path, header, lines, line_no, seen,
                                                                allow_duplicates, check_nucleotide)
        except InputError as error:
            if on_bad_record is None:
                raise
            identifier = header.strip().partition(" ")[0]
            on_bad_record(BadRecord(str(path), identifier, line_no, error.problem))
            skipped += 1
            continue
        safe = ""
        if safe_ids:
            safe = safe_name(identifier)
            if safe_seen.get(safe, identifier) != identifier:
                safe = safe_name(identifier, hashed=True)
            safe_seen[safe] = identifier
        count += 1
        yield Record(identifier, description, sequence, safe)
    if count == 0:
        raise InputError("contains no FASTA records" if not skipped else
                         f"contains no usable FASTA records ({skipped} bad records skipped)", path=path)


def _checked_record(path: Path, header: str, lines: list[str], line_no: int, seen: dict[str, int],
                    allow_duplicates: bool, check_nucleotide: bool) -> tuple[str, str, str]:
    """``(id, description, normalised sequence)`` of one record, or the InputError of its first problem."""
    identifier, _, description = header.strip().partition(" ")
    if not identifier:
        raise InputError(f"empty header (no ID) at line {line_no}", path=path)
    if identifier in seen and not allow_duplicates:
        raise InputError(f"duplicate ID (first seen at line {seen[identifier]}, again at line {line_no})",
                         path=path, record=identifier)
    sequence = _check_sequence(path, identifier, lines, line_no)
    if check_nucleotide and looks_nucleotide(sequence):
        raise InputError("looks like a nucleotide sequence (only A, C, G, T/U, N); trackfold needs protein "
                         "sequences (translate first)", path=path, record=identifier)
    if not allow_duplicates:
        seen[identifier] = line_no   # a skipped bad record does not claim its ID
    return identifier, description.strip(), sequence


def _check_sequence(path: Path, identifier: str, lines: list[str], header_line: int) -> str:
    parts = []
    for offset, line in enumerate(lines, start=1):
        stripped = line.rstrip()
        if stripped.endswith("*") and offset == len(lines):
            stripped = stripped[:-1]
        bad = first_invalid(stripped)
        if bad is not None:
            residue = sum(len(p) for p in parts) + bad + 1
            char = stripped[bad]
            what = {" ": "a space", "\t": "a tab", "*": "an internal stop '*'"}.get(
                char, "a digit" if char.isdigit() else f"the character {char!r}")
            raise InputError(f"{what} at residue {residue} (line {header_line + offset}) is not allowed in a "
                             "protein sequence", path=path, record=identifier)
        parts.append(stripped)
    sequence = "".join(parts)
    if not sequence:
        raise InputError(f"empty sequence (header at line {header_line})", path=path, record=identifier)
    return normalize_residues(sequence)


def read_fasta(path: str | Path, *, check_nucleotide: bool = True) -> list[Record]:
    """All records of a protein FASTA file, validated (see :func:`iter_fasta`)."""
    return list(iter_fasta(path, check_nucleotide=check_nucleotide))


def format_fasta(records: Iterable[tuple[str, str]], *, width: int = 60) -> str:
    """FASTA text from (header, sequence) pairs; ``width=0`` writes each sequence on one line."""
    out = []
    for header, sequence in records:
        out.append(f">{header}\n")
        if width:
            out.extend(sequence[i:i + width] + "\n" for i in range(0, len(sequence), width))
        else:
            out.append(sequence + "\n")
    return "".join(out)


def write_fasta(path: str | Path, records: Iterable[tuple[str, str]], *, width: int = 60) -> None:
    """Write (header, sequence) pairs as FASTA, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(format_fasta(records, width=width), encoding="utf-8")
