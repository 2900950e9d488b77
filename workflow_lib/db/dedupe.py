"""The database build's first pass: every usable record's ID and sequence as hashes in bucket files on disk,
then the duplicate IDs resolved bucket by bucket, so memory holds one bucket, never the whole database.

Each record that passes the FASTA policy gets a number (its position among those records, over all inputs in
order) and one row ``(record, ID hash, sequence hash, length)`` (128-bit BLAKE2b hashes: a collision among 10^12
IDs has probability about 10^-15) in bucket ``ID hash mod`` :data:`BUCKETS`. Records with one ID share a bucket,
so each bucket decides alone, as :mod:`workflow_lib.db.build` specifies: the first record of an ID is kept; a
later one with the same sequence is dropped; one with another sequence is renamed (its ordinal among those is
kept, the name is chosen when the second pass reaches it) or, with ``duplicate_ids="error"``, refused. What a
bucket decides is a few numbers per duplicate, so the decisions stay small unless most of a database repeats.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BUCKETS = 256
"""Bucket files of the first pass (about 40 bytes per record on disk, spread over them)."""
FLUSH_ROWS = 1 << 16
"""Rows buffered in memory before they are appended to their bucket files."""

ROW = np.dtype([("record", "<u8"), ("id_hi", "<u8"), ("id_lo", "<u8"), ("seq_hi", "<u8"), ("seq_lo", "<u8"),
                ("length", "<u4")])


def digest(text: str) -> tuple[int, int]:
    """The 128-bit BLAKE2b hash of ``text`` as two unsigned 64-bit integers."""
    value = hashlib.blake2b(text.encode(), digest_size=16).digest()
    return int.from_bytes(value[:8], "little"), int.from_bytes(value[8:], "little")


class BucketWriter:
    """Appends rows to ``BUCKETS`` files in ``folder``, :data:`FLUSH_ROWS` at a time."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.pending: list[tuple[int, int, int, int, int, int]] = []
        folder.mkdir(parents=True, exist_ok=True)

    def path(self, bucket: int) -> Path:
        return self.folder / f"bucket_{bucket:04d}.bin"

    def add(self, record: int, identifier: str, sequence: str) -> None:
        id_hi, id_lo = digest(identifier)
        seq_hi, seq_lo = digest(sequence)
        self.pending.append((record, id_hi, id_lo, seq_hi, seq_lo, len(sequence)))
        if len(self.pending) >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        rows = np.array(self.pending, dtype=ROW)
        self.pending = []
        buckets = rows["id_lo"] % BUCKETS
        order = np.argsort(buckets, kind="stable")
        rows, buckets = rows[order], buckets[order]
        starts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
        for start, end in zip(starts, np.r_[starts[1:], len(rows)]):
            with open(self.path(int(buckets[start])), "ab") as handle:
                rows[start:end].tofile(handle)

    def ids_path(self, bucket: int) -> Path:
        """The bucket's distinct ID hashes, sorted (``[n, 2]`` uint64: high, low), written by :func:`resolve`."""
        return self.folder / f"ids_{bucket:04d}.npy"

    def read(self, bucket: int) -> np.ndarray:
        path = self.path(bucket)
        return np.fromfile(path, dtype=ROW) if path.exists() else np.zeros(0, dtype=ROW)


@dataclass(frozen=True)
class Decisions:
    """What the second pass does with each record: ``drop`` and ``rename`` are sorted record numbers
    (``rename_ordinal[i]``: 2 for an ID's first renamed copy, 3 for the next, ...); ``conflict``: the first
    record whose ID was used before with another sequence (``duplicate_ids="error"``), with that earlier
    record's number, or None."""

    drop: np.ndarray
    rename: np.ndarray
    rename_ordinal: np.ndarray
    kept_sequences: int
    kept_residues: int
    conflict: tuple[int, int] | None


def resolve(writer: BucketWriter) -> Decisions:
    """Decide every duplicate ID, one bucket at a time."""
    drops, renames, ordinals = [], [], []
    kept_sequences = kept_residues = 0
    conflict: tuple[int, int] | None = None
    for bucket in range(BUCKETS):
        rows = writer.read(bucket)
        if rows.size == 0:
            continue
        rows = rows[np.lexsort((rows["record"], rows["id_lo"], rows["id_hi"]))]
        new_id = np.r_[True, (rows["id_hi"][1:] != rows["id_hi"][:-1]) | (rows["id_lo"][1:] != rows["id_lo"][:-1])]
        np.save(writer.ids_path(bucket), np.stack([rows["id_hi"][new_id], rows["id_lo"][new_id]], axis=1))
        first = np.maximum.accumulate(np.where(new_id, np.arange(rows.size), 0))  # row of each ID's first record
        same_sequence = (rows["seq_hi"] == rows["seq_hi"][first]) & (rows["seq_lo"] == rows["seq_lo"][first])
        drop = ~new_id & same_sequence
        rename = ~new_id & ~same_sequence
        # ordinal of a renamed copy among its ID's renamed copies, from 2
        group = np.cumsum(new_id) - 1
        renamed_before = np.cumsum(rename) - rename
        group_start_count = renamed_before[np.flatnonzero(new_id)][group]
        drops.append(rows["record"][drop])
        renames.append(rows["record"][rename])
        ordinals.append((renamed_before - group_start_count + 2)[rename])
        kept = ~drop
        kept_sequences += int(kept.sum())
        kept_residues += int(rows["length"][kept].sum())
        if rename.any():
            candidates = np.flatnonzero(rename)
            best = candidates[np.argmin(rows["record"][candidates])]
            found = (int(rows["record"][best]), int(rows["record"][first[best]]))
            conflict = found if conflict is None or found[0] < conflict[0] else conflict
    drop = np.sort(np.concatenate(drops)) if drops else np.zeros(0, np.uint64)
    rename = np.concatenate(renames) if renames else np.zeros(0, np.uint64)
    ordinal = np.concatenate(ordinals) if ordinals else np.zeros(0, np.int64)
    order = np.argsort(rename, kind="stable")
    return Decisions(drop, rename[order], ordinal[order].astype(np.int64), kept_sequences, kept_residues, conflict)


class IdLookup:
    """Whether an ID is a kept record's ID (for renamed copies' names): a binary search in the bucket's sorted
    ID hashes, which :func:`resolve` wrote and which are read memory-mapped (nothing is loaded per question)."""

    def __init__(self, writer: BucketWriter) -> None:
        self.writer = writer
        self.opened: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def __contains__(self, identifier: str) -> bool:
        hi, lo = digest(identifier)
        bucket = lo % BUCKETS
        if bucket not in self.opened:
            path = self.writer.ids_path(bucket)
            if not path.exists():
                return False
            ids = np.load(path, mmap_mode="r")
            self.opened[bucket] = (ids[:, 0], ids[:, 1])
        his, los = self.opened[bucket]
        start, end = np.searchsorted(his, hi, side="left"), np.searchsorted(his, hi, side="right")
        return bool((los[start:end] == lo).any())


class ShardCutter:
    """Where the streamed records are cut into ``shards`` shards of about equal residues: shard ``k`` starts at
    the first record position ``p`` after the previous start at which the records so far reach ``k/shards`` of
    all residues, or earlier when only as many records as shards remain (every shard holds at least one)."""

    def __init__(self, kept_residues: int, kept_sequences: int, shards: int) -> None:
        self.targets = [kept_residues * k / shards for k in range(1, shards)]
        self.total = kept_sequences
        self.shards = shards
        self.start = 0

    def cut_after(self, position: int, cumulative: int) -> bool:
        """True when a shard ends after ``position`` records whose residues add up to ``cumulative``."""
        k = self.shards - len(self.targets)          # index of the next shard to start
        if not self.targets or position < self.start + 1:
            return False
        limit = self.total - (self.shards - k)
        if cumulative >= self.targets[0] or position >= limit:
            self.targets.pop(0)
            self.start = position
            return True
        return False
