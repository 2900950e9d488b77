"""Multiple sequence alignments: A3M, aligned FASTA and Stockholm, as one :class:`Alignment` type.

The canonical in-memory form is the A3M row (HH-suite's convention; Steinegger et al. 2019, BMC Bioinformatics 20:473):
upper-case letters and ``-`` are match columns (``-`` a deletion), lower-case letters are insertions relative
to the query, ``.`` is ignored. Row 0 is the query. From the rows, :class:`Alignment` derives

- ``matches``: uint8 ``[N, L]`` residue codes of the match columns (deletions are ``GAP_CODE``);
- ``insertions``: int32 ``[N, L + 1]``, ``insertions[n, j]`` = residues inserted between match columns
  ``j - 1`` and ``j`` (``j = 0``: before the first column, ``j = L``: after the last).

Aligned FASTA and Stockholm are converted to A3M rows by choosing match columns: in aligned FASTA the columns
where the query (first row) has a residue; in Stockholm the ``#=GC RF`` annotation when present, otherwise the
columns with fewer than 50% gaps (HMMER's ``hmmbuild --fast`` rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workflow_lib.errors import InputError
from workflow_lib.seqio.alphabet import encode, first_invalid
from workflow_lib.seqio.atomic import atomic_path
from workflow_lib.seqio.fasta import format_fasta, open_text

_LOWER = np.zeros(256, dtype=bool)
_LOWER[np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)] = True
_MATCH = np.zeros(256, dtype=bool)
_MATCH[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ-", dtype=np.uint8)] = True


@dataclass(frozen=True)
class Alignment:
    """An MSA in A3M form; see the module docstring for the derived arrays."""

    names: tuple[str, ...]
    descriptions: tuple[str, ...]
    rows: tuple[str, ...]
    matches: np.ndarray = field(repr=False)
    insertions: np.ndarray = field(repr=False)
    annotations: tuple[tuple[str, str], ...] = ()
    """HH-suite annotation rows (``ss_pred``, ``ss_conf``, ``ss_dssp``, ``sa_dssp``) as (name, match-column string)."""

    @classmethod
    def from_a3m_rows(cls, names: Sequence[str], descriptions: Sequence[str], rows: Sequence[str], *,
                      source: str | Path | None = None,
                      annotations: Sequence[tuple[str, str]] = ()) -> Alignment:
        """Validate A3M rows (equal match-column counts, residue letters only) and derive the arrays."""
        if not rows:
            raise InputError("alignment has no sequences", path=source)
        if not (len(names) == len(descriptions) == len(rows)):
            raise ValueError("names, descriptions and rows differ in length")
        clean_rows = []
        match_rows = []
        insertion_rows = []
        length = None
        for name, row in zip(names, rows):
            row = row.replace(".", "")
            raw = np.frombuffer(row.encode("ascii", errors="replace"), dtype=np.uint8)
            is_lower = _LOWER[raw]
            is_match = _MATCH[raw]
            bad = np.flatnonzero(~(is_lower | is_match))
            if bad.size or first_invalid(row.replace("-", "")) is not None:
                index = int(bad[0]) if bad.size else first_invalid(row.replace("-", ""))
                raise InputError(f"character {row[index]!r} at column {index + 1} is not an alignment symbol",
                                 path=source, record=name)
            n_match = int(is_match.sum())
            if length is None:
                length = n_match
            elif n_match != length:
                raise InputError(f"has {n_match} match columns but the query has {length}", path=source,
                                 record=name)
            match_positions = np.flatnonzero(is_match)
            match_rows.append(encode(bytes(raw[match_positions]).decode("ascii")))
            # Insertions before match column j: lower-case letters between match columns j-1 and j.
            lower_before = np.concatenate([[0], np.cumsum(is_lower)])
            segment_ends = np.concatenate([match_positions, [raw.size]])
            segment_starts = np.concatenate([[0], match_positions + 1])
            insertion_rows.append((lower_before[segment_ends] - lower_before[segment_starts]).astype(np.int32))
            clean_rows.append(row)
        if length == 0:
            raise InputError("the query has no match columns", path=source, record=names[0])
        matches = np.stack(match_rows).astype(np.uint8)
        insertions = np.stack(insertion_rows)
        matches.setflags(write=False)
        insertions.setflags(write=False)
        for key, value in annotations:
            if len(value) != length:
                raise InputError(f"annotation has {len(value)} columns, the alignment {length}", path=source,
                                 record=key)
        return cls(tuple(names), tuple(descriptions), tuple(clean_rows), matches, insertions,
                   tuple((k, v) for k, v in annotations))

    @property
    def depth(self) -> int:
        """Number of sequences N (the query included)."""
        return len(self.rows)

    @property
    def length(self) -> int:
        """Number of match columns L (the query's length when the query has no deletions)."""
        return int(self.matches.shape[1])

    @property
    def query(self) -> str:
        """The query's residues (row 0 without gaps, upper case)."""
        return self.rows[0].replace("-", "").upper()

    def annotation(self, key: str) -> str | None:
        """An HH-suite annotation row (e.g. ``ss_pred``), or None."""
        return dict(self.annotations).get(key)

    def subset(self, indices: Sequence[int] | np.ndarray) -> Alignment:
        """The alignment restricted to the given rows (in the given order); annotations are kept."""
        indices = [int(i) for i in indices]
        return Alignment(tuple(self.names[i] for i in indices), tuple(self.descriptions[i] for i in indices),
                         tuple(self.rows[i] for i in indices), self.matches[indices], self.insertions[indices],
                         self.annotations)

    def aligned_rows(self) -> list[str]:
        """Rows in aligned-FASTA form: every row the same width, insert columns padded with ``-``."""
        width = self.insertions.max(axis=0)
        out = []
        for row, counts in zip(self.rows, self.insertions):
            pieces = []
            position = 0
            for column in range(self.length + 1):
                inserted = row[position:position + int(counts[column])]
                position += int(counts[column])
                pieces.append(inserted.upper() + "-" * (int(width[column]) - len(inserted)))
                if column < self.length:
                    pieces.append(row[position])
                    position += 1
            out.append("".join(pieces))
        return out


def _headers(headers: Sequence[str]) -> tuple[list[str], list[str]]:
    names, descriptions = [], []
    for header in headers:
        name, _, description = header.strip().partition(" ")
        names.append(name)
        descriptions.append(description.strip())
    return names, descriptions


def _read_fasta_like(path: Path) -> tuple[list[str], list[str]]:
    headers: list[str] = []
    rows: list[list[str]] = []
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if line.startswith(">"):
                headers.append(line[1:])
                rows.append([])
            elif line.startswith("#") and not headers:
                continue  # A3M files from HH-suite may start with a '#' comment line
            elif line.strip():
                if not headers:
                    raise InputError(f"not an A3M/FASTA alignment (line {number} does not start with '>')",
                                     path=path)
                rows[-1].append(line.strip())
    if not headers:
        raise InputError("contains no sequences", path=path)
    joined = ["".join(r) for r in rows]
    for header, row in zip(headers, joined):
        if not row:
            raise InputError("empty sequence", path=path, record=header.split(" ")[0])
    return headers, joined


ANNOTATION_NAMES = frozenset({"ss_pred", "ss_conf", "ss_dssp", "sa_dssp"})
"""HH-suite's annotation rows in A3M files; they are not sequences."""


def _split_annotations(headers: list[str], rows: list[str]) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    kept_headers, kept_rows, annotations = [], [], []
    for header, row in zip(headers, rows):
        name = header.split(" ")[0]
        if name in ANNOTATION_NAMES:
            annotations.append((name, row))
        else:
            kept_headers.append(header)
            kept_rows.append(row)
    return kept_headers, kept_rows, annotations


def read_a3m(path: str | Path) -> Alignment:
    """Read an A3M file (plain or .gz); row 0 is the query; ``ss_pred``-style rows become annotations."""
    path = Path(path)
    headers, rows = _read_fasta_like(path)
    headers, rows, annotations = _split_annotations(headers, rows)
    names, descriptions = _headers(headers)
    return Alignment.from_a3m_rows(names, descriptions, rows, source=path, annotations=annotations)


def _to_a3m_rows(aligned: Sequence[str], match_columns: np.ndarray) -> list[str]:
    out = []
    for row in aligned:
        chars = np.frombuffer(row.encode("ascii", errors="replace"), dtype=np.uint8).copy()
        is_gap = (chars == ord("-")) | (chars == ord("."))
        upper = np.char.upper(np.frombuffer(chars.tobytes(), dtype="S1")).view(np.uint8)
        lower = np.char.lower(np.frombuffer(chars.tobytes(), dtype="S1")).view(np.uint8)
        result = np.where(match_columns, np.where(is_gap, ord("-"), upper), lower)
        keep = match_columns | ~is_gap
        out.append(result[keep].astype(np.uint8).tobytes().decode("ascii"))
    return out


def alignment_from_aligned(names: Sequence[str], descriptions: Sequence[str], aligned: Sequence[str],
                           match_columns: np.ndarray, *, source: str | Path | None = None) -> Alignment:
    """Build an Alignment from equal-width aligned rows and a boolean match-column mask."""
    widths = {len(row) for row in aligned}
    if len(widths) != 1:
        for name, row in zip(names, aligned):
            if len(row) != len(aligned[0]):
                raise InputError(f"has {len(row)} columns but the first sequence has {len(aligned[0])}",
                                 path=source, record=name)
    return Alignment.from_a3m_rows(names, descriptions, _to_a3m_rows(aligned, np.asarray(match_columns)),
                                   source=source)


def read_aligned_fasta(path: str | Path) -> Alignment:
    """Read aligned FASTA (all rows one width); match columns are where the first row has a residue."""
    path = Path(path)
    headers, rows = _read_fasta_like(path)
    names, descriptions = _headers(headers)
    if any(len(row) != len(rows[0]) for row in rows):
        bad = next(i for i, row in enumerate(rows) if len(row) != len(rows[0]))
        raise InputError(f"has {len(rows[bad])} columns but the first sequence has {len(rows[0])}",
                         path=path, record=names[bad])
    query = np.frombuffer(rows[0].encode("ascii", errors="replace"), dtype=np.uint8)
    match_columns = (query != ord("-")) & (query != ord("."))
    return alignment_from_aligned(names, descriptions, rows, match_columns, source=path)


def read_stockholm(path: str | Path) -> Alignment:
    """Read the first alignment of a Stockholm file (Pfam/HMMER style; multi-block; ``#=GS DE`` kept).

    Match columns come from ``#=GC RF`` when present (non-gap characters), else columns with < 50% gaps.
    """
    path = Path(path)
    order: list[str] = []
    pieces: dict[str, list[str]] = {}
    reference: list[str] = []
    descriptions: dict[str, str] = {}
    seen_header = False
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if not seen_header:
                if not line.strip():
                    continue
                if not line.startswith("# STOCKHOLM"):
                    raise InputError(f"not a Stockholm file (line {number} is not '# STOCKHOLM 1.0')", path=path)
                seen_header = True
                continue
            if line.startswith("//"):
                break
            if not line.strip():
                continue
            if line.startswith("#=GC RF"):
                reference.append(line.split()[-1])
            elif line.startswith("#=GS"):
                fields = line.split(None, 3)
                if len(fields) == 4 and fields[2] == "DE":
                    descriptions[fields[1]] = fields[3]
            elif line.startswith("#"):
                continue
            else:
                fields = line.split()
                if len(fields) != 2:
                    raise InputError(f"line {number} is not 'name aligned-sequence'", path=path)
                name, chunk = fields
                if name not in pieces:
                    order.append(name)
                    pieces[name] = []
                pieces[name].append(chunk)
    if not seen_header:
        raise InputError("not a Stockholm file (empty)", path=path)
    if not order:
        raise InputError("Stockholm alignment has no sequences", path=path)
    aligned = ["".join(pieces[name]) for name in order]
    width = len(aligned[0])
    for name, row in zip(order, aligned):
        if len(row) != width:
            raise InputError(f"has {len(row)} columns but '{order[0]}' has {width}", path=path, record=name)
    if reference:
        rf = np.frombuffer("".join(reference).encode("ascii"), dtype=np.uint8)
        if rf.size != width:
            raise InputError(f"#=GC RF has {rf.size} columns, the sequences {width}", path=path)
        match_columns = (rf != ord(".")) & (rf != ord("-"))
    else:
        chars = np.frombuffer("".join(aligned).encode("ascii"), dtype=np.uint8).reshape(len(aligned), width)
        gaps = (chars == ord("-")) | (chars == ord("."))
        match_columns = gaps.mean(axis=0) < 0.5
    return alignment_from_aligned(order, [descriptions.get(n, "") for n in order], aligned, match_columns,
                                  source=path)


def read_alignment(path: str | Path) -> Alignment:
    """Read A3M, aligned FASTA or Stockholm, chosen by content (Stockholm header, lower case → A3M)."""
    path = Path(path)
    with open_text(path) as handle:
        head = handle.read(4096)
    if head.lstrip().startswith("# STOCKHOLM"):
        return read_stockholm(path)
    body = "\n".join(line for line in head.splitlines() if not line.startswith(">"))
    if any(c.islower() for c in body) or path.name.endswith((".a3m", ".a3m.gz")):
        return read_a3m(path)
    return read_aligned_fasta(path)


def format_a3m(alignment: Alignment) -> str:
    headers = [f"{n} {d}".rstrip() for n, d in zip(alignment.names, alignment.descriptions)]
    return format_fasta(list(alignment.annotations) + list(zip(headers, alignment.rows)), width=0)


def write_a3m(path: str | Path, alignment: Alignment) -> None:
    """Write A3M (one line per sequence, query first), atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(format_a3m(alignment), encoding="utf-8")


def write_aligned_fasta(path: str | Path, alignment: Alignment) -> None:
    """Write aligned FASTA (insert columns expanded, all rows one width), atomically."""
    headers = [f"{n} {d}".rstrip() for n, d in zip(alignment.names, alignment.descriptions)]
    with atomic_path(path) as tmp:
        tmp.write_text(format_fasta(zip(headers, alignment.aligned_rows()), width=0), encoding="utf-8")


A3M_SUFFIXES = (".a3m.gz", ".a3m")


def a3m_stem(path: str | Path) -> str:
    """Output stem of an A3M: the file name without ``.a3m`` / ``.a3m.gz`` (else without its last suffix).

    Every stage that writes one file per A3M (features, template hits, predictions) names it by this stem.
    """
    name = Path(path).name
    for suffix in A3M_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[:-len(suffix)]
    return Path(name).stem
