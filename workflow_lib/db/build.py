"""Build a sharded sequence database from FASTA files.

Layout of ``DIR`` (``results/db/{database}/`` in the workflow):

- ``shard_000.parquet`` … ``shard_{N-1}.parquet``: table :data:`~workflow_lib.schemas.db.SHARD`
  (id, description, residue codes, length), contiguous runs of the input in input order, cut so that every
  shard holds about the same number of residues;
- ``shard_000.kmer.npz`` …: the k-mer index of each shard (:mod:`workflow_lib.db.kmer_index`), which the
  prefilter reads instead of scanning every residue;
- ``manifest.json``: format version, totals (sequences, residues), per-shard counts and SHA-256, per-input
  SHA-256 and counts. Every later stage computes E-values from the manifest *totals*, never from one shard,
  so a sharded search ranks and scores hits exactly as an unsharded one.

Duplicate IDs (real databases have them: Prokka's genus_Escherichia repeats 15 IDs) are handled so that every
target ID in the database is unique: a record with the ID *and* sequence of an earlier one is dropped (it would
only double hits and inflate the database size); a record with an earlier ID but another sequence is renamed
``ID__2``, ``ID__3``, … (``duplicate_ids="rename"``, the default; a name that another record of the database
already has, before or after it, is skipped, so every ID is unique) or stops the build
(``duplicate_ids="error"``). The manifest counts both.

The build streams in two passes, so its memory is bounded by one shard (and one bucket of hashes), not by the
database: the first pass writes each record's hashed ID and sequence to bucket files and decides the duplicates
bucket by bucket (:mod:`workflow_lib.db.dedupe`); the second reads the inputs again and writes the kept records
shard by shard, cutting a shard where the residues so far reach its share of the total.

A record that breaks the FASTA policy (a character that is not a residue, an empty or a nucleotide sequence,
a header without ID; :mod:`workflow_lib.seqio.fasta`) is skipped, logged and counted per input in the manifest
with the first :data:`REPORTED_BAD_RECORDS` of them (``on_bad_record="skip"``, the default: one bad record among
millions must not stop a database build), or stops the build naming file, record and problem
(``on_bad_record="error"``). A file that is not FASTA at all always stops it.

Rebuilding with unchanged inputs and settings is a no-op (the manifest records what it was built from).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from workflow_lib.db.dedupe import BucketWriter, Decisions, IdLookup, ShardCutter, resolve
from workflow_lib.db.kmer_index import DEFAULT_SHAPE, build_kmer_index, shape_offsets
from workflow_lib.errors import InputError, SchemaError
from workflow_lib.schemas.db import KMER_INDEX, SHARD
from workflow_lib.schemas.io import read_npz, read_table, write_npz, write_table
from workflow_lib.seqio.alphabet import encode
from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.seqio.fasta import BadRecord, iter_fasta

FORMAT_VERSION = 2  # 2: shards carry a k-mer index
WORK_PREFIX = ".build-"
"""The first pass's bucket files live in ``DIR/.build-*`` while a build runs (removed after it, or by the next)."""
MANIFEST = "manifest.json"
LOG = logging.getLogger(__name__)


def shard_name(index: int) -> str:
    return f"shard_{index:03d}.parquet"


def index_name(index: int) -> str:
    return f"shard_{index:03d}.kmer.npz"


def sha256_file(path: str | Path, *, block: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(block):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class Manifest:
    """What a database directory holds; ``total_*`` are the whole database's sizes."""

    format_version: int
    total_sequences: int
    total_residues: int
    shards: tuple[dict, ...]
    inputs: tuple[dict, ...]
    settings: dict

    @property
    def n_shards(self) -> int:
        return len(self.shards)

    def to_json(self) -> str:
        return json.dumps({"format_version": self.format_version, "total_sequences": self.total_sequences,
                           "total_residues": self.total_residues, "shards": list(self.shards),
                           "inputs": list(self.inputs), "settings": self.settings}, indent=2) + "\n"


def read_manifest(db_dir: str | Path) -> Manifest:
    """Load and check ``DIR/manifest.json`` (format version, totals equal the shard sums)."""
    path = Path(db_dir) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("no database manifest here; build it with 'trackfold db build'", path=path) from None
    except json.JSONDecodeError as error:
        raise SchemaError(f"{path}: not valid JSON (truncated?): {error}") from None
    if data.get("format_version") != FORMAT_VERSION:
        raise SchemaError(f"{path}: database format version {data.get('format_version')!r}, "
                          f"this trackfold reads {FORMAT_VERSION}; rebuild the database")
    manifest = Manifest(FORMAT_VERSION, int(data["total_sequences"]), int(data["total_residues"]),
                        tuple(data["shards"]), tuple(data["inputs"]), dict(data.get("settings", {})))
    if sum(s["sequences"] for s in manifest.shards) != manifest.total_sequences or \
            sum(s["residues"] for s in manifest.shards) != manifest.total_residues:
        raise SchemaError(f"{path}: shard counts do not add up to the totals")
    return manifest


DUPLICATE_POLICIES = ("rename", "error")
BAD_RECORD_POLICIES = ("skip", "error")
DEFAULT_SHARDS = 1
"""Shards of a database (``trackfold db build --shards``, ``databases.NAME.shards``)."""
DEFAULT_DUPLICATE_IDS = "rename"
"""A reused ID with another sequence becomes ``ID__2`` (``--duplicate-ids``, ``databases.NAME.duplicate_ids``)."""
DEFAULT_ON_BAD_RECORD = "skip"
"""A record that breaks the FASTA policy is skipped and counted (``--on-bad-record``,
``databases.NAME.on_bad_record``)."""
REPORTED_BAD_RECORDS = 20
"""Bad records listed per input in the manifest (all of them are counted)."""


class BadRecords:
    """The skipped records of one input: a count, the first :data:`REPORTED_BAD_RECORDS`, one log line each."""

    def __init__(self) -> None:
        self.count = 0
        self.examples: list[dict] = []

    def __call__(self, bad: BadRecord) -> None:
        self.count += 1
        if len(self.examples) < REPORTED_BAD_RECORDS:
            self.examples.append({"record": bad.record, "line": bad.line, "reason": bad.reason})
            LOG.warning("%s: record '%s' (line %d) skipped: %s", bad.path, bad.record, bad.line, bad.reason)


def build_database(fasta_paths: Sequence[str | Path], out_dir: str | Path, *, shards: int = DEFAULT_SHARDS,
                   duplicate_ids: str = DEFAULT_DUPLICATE_IDS, on_bad_record: str = DEFAULT_ON_BAD_RECORD,
                   seed_shape: str = DEFAULT_SHAPE, force: bool = False) -> tuple[Manifest, bool]:
    """Build (or confirm up to date) a database; returns ``(manifest, rebuilt)``.

    See the module docstring for duplicate IDs and bad records. The number of shards is capped at the number of
    sequences. ``seed_shape``: the k-mer index's seed shape (:mod:`workflow_lib.db.kmer_index`; ``"1111"`` for
    plain 4-mers).
    """
    if duplicate_ids not in DUPLICATE_POLICIES:
        raise InputError(f"duplicate_ids must be one of {DUPLICATE_POLICIES}, got {duplicate_ids!r}")
    if on_bad_record not in BAD_RECORD_POLICIES:
        raise InputError(f"on_bad_record must be one of {BAD_RECORD_POLICIES}, got {on_bad_record!r}")
    if shards < 1:
        raise InputError(f"number of shards must be at least 1, got {shards}")
    shape_offsets(seed_shape)  # InputError for a malformed shape, before any shard is written
    if not fasta_paths:
        raise InputError("no input FASTA files given")
    out_dir = Path(out_dir)
    inputs = []
    for path in fasta_paths:
        path = Path(path)
        if not path.is_file():
            raise InputError("database FASTA does not exist", path=path)
        inputs.append({"path": str(path), "sha256": sha256_file(path)})
    settings = {"shards": shards, "duplicate_ids": duplicate_ids, "on_bad_record": on_bad_record,
                "seed_shape": seed_shape}
    if not force and _up_to_date(out_dir, inputs, settings):
        LOG.info("database %s is up to date (inputs unchanged)", out_dir)
        return read_manifest(out_dir), False

    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(f"{WORK_PREFIX}*"):   # what a killed build left behind
        shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=WORK_PREFIX) as work:
        writer = BucketWriter(Path(work))
        bad = _scan(inputs, writer, on_bad_record)
        decisions = resolve(writer)
        if decisions.conflict is not None and duplicate_ids == "error":
            _raise_conflict(inputs, decisions.conflict, on_bad_record)
        shard_entries = _write_shards(inputs, out_dir, decisions, IdLookup(writer), shards=shards,
                                      on_bad_record=on_bad_record, seed_shape=seed_shape)
    for entry, skipped in zip(inputs, bad):
        entry.update(bad_records=skipped.count, bad_record_examples=skipped.examples)
        if skipped.count:
            LOG.warning("%s: %d bad records skipped (listed in the manifest)", entry["path"], skipped.count)
    current = {name for s in shard_entries for name in (s["file"], s["index"])}
    for stale in list(out_dir.glob("shard_*.parquet")) + list(out_dir.glob("shard_*.kmer.npz")):
        if stale.name not in current:
            stale.unlink()
    manifest = Manifest(FORMAT_VERSION, decisions.kept_sequences, decisions.kept_residues, tuple(shard_entries),
                        tuple(inputs), settings)
    write_text_atomic(out_dir / MANIFEST, manifest.to_json())  # written last: its presence means complete
    LOG.info("built %s: %d sequences, %d residues, %d shards", out_dir, manifest.total_sequences,
             manifest.total_residues, len(shard_entries))
    return manifest, True


def _records(inputs: list[dict], on_bad_record: str, bad: list[BadRecords] | None = None):
    """``(input index, record)`` of every record that passes the FASTA policy, over all inputs in order (the
    same records in both passes)."""
    for number, entry in enumerate(inputs):
        callback = None
        if on_bad_record == "skip":
            callback = bad[number] if bad is not None else _ignore
        for record in iter_fasta(entry["path"], allow_duplicates=True, on_bad_record=callback, safe_ids=False):
            yield number, record


def _ignore(bad: BadRecord) -> None:
    """The second pass skips the bad records the first pass has reported."""


def _scan(inputs: list[dict], writer: BucketWriter, on_bad_record: str) -> list[BadRecords]:
    """First pass: one hashed row per record into the bucket files; the bad records of each input."""
    bad = [BadRecords() for _ in inputs]
    for number, (_, record) in enumerate(_records(inputs, on_bad_record, bad)):
        writer.add(number, record.id, record.sequence)
    writer.flush()
    return bad


def _raise_conflict(inputs: list[dict], conflict: tuple[int, int], on_bad_record: str) -> None:
    """``duplicate_ids="error"``: name the first record whose ID was used before with another sequence."""
    wanted, earlier = conflict
    where = {}
    for number, (source, record) in enumerate(_records(inputs, on_bad_record)):
        if number in (wanted, earlier):
            where[number] = (inputs[source]["path"], record.id)
        if number >= wanted:
            break
    path, identifier = where[wanted]
    raise InputError(f"duplicate ID with a different sequence (first in {where[earlier][0]})", path=path,
                     record=identifier)


class _ShardBuffer:
    """The records of the shard being filled, written out (table, k-mer index) when the shard is cut."""

    def __init__(self, out_dir: Path, seed_shape: str) -> None:
        self.out_dir = out_dir
        self.seed_shape = seed_shape
        self.entries: list[dict] = []
        self.clear()

    def clear(self) -> None:
        self.ids: list[str] = []
        self.descriptions: list[str] = []
        self.codes: list[np.ndarray] = []

    def add(self, identifier: str, description: str, sequence: str) -> None:
        self.ids.append(identifier)
        self.descriptions.append(description)
        self.codes.append(encode(sequence))

    def write(self) -> None:
        index = len(self.entries)
        lengths = np.fromiter((c.size for c in self.codes), dtype=np.int64, count=len(self.codes))
        table = pa.table({
            "id": pa.array(self.ids, pa.string()),
            "description": pa.array(self.descriptions, pa.string()),
            "sequence": pa.array([c.tobytes() for c in self.codes], pa.binary()),
            "length": pa.array(lengths.astype(np.int32), pa.int32()),
        })
        path = self.out_dir / shard_name(index)
        write_table(path, table, SHARD)
        del table
        flat = np.concatenate(self.codes)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.clear()
        write_npz(self.out_dir / index_name(index), build_kmer_index(flat, offsets, shape=self.seed_shape),
                  KMER_INDEX)
        self.entries.append({"file": shard_name(index), "index": index_name(index), "sequences": len(lengths),
                             "residues": int(lengths.sum()), "sha256": sha256_file(path)})
        LOG.info("shard %d written: %d sequences, %d residues", index, len(lengths), int(lengths.sum()))


def _write_shards(inputs: list[dict], out_dir: Path, decisions: Decisions, originals: IdLookup, *, shards: int,
                  on_bad_record: str, seed_shape: str) -> list[dict]:
    """Second pass: the kept records, renamed where decided, into shards of about equal residues."""
    n_shards = min(shards, decisions.kept_sequences)
    cutter = ShardCutter(decisions.kept_residues, decisions.kept_sequences, n_shards)
    buffer = _ShardBuffer(out_dir, seed_shape)
    drop, rename, ordinal = decisions.drop, decisions.rename, decisions.rename_ordinal
    next_drop = next_rename = 0
    assigned: set[str] = set()
    for entry in inputs:
        entry.update(sequences=0, residues=0, duplicates_dropped=0, duplicates_renamed=0)
    position = cumulative = 0
    for number, (source, record) in enumerate(_records(inputs, on_bad_record)):
        entry = inputs[source]
        if next_drop < drop.size and drop[next_drop] == number:
            next_drop += 1
            entry["duplicates_dropped"] += 1
            continue
        identifier = record.id
        if next_rename < rename.size and rename[next_rename] == number:
            copy = int(ordinal[next_rename])
            next_rename += 1
            while f"{record.id}__{copy}" in assigned or f"{record.id}__{copy}" in originals:
                copy += 1
            identifier = f"{record.id}__{copy}"
            assigned.add(identifier)
            entry["duplicates_renamed"] += 1
        buffer.add(identifier, record.description, record.sequence)
        entry["sequences"] += 1
        entry["residues"] += len(record.sequence)
        position += 1
        cumulative += len(record.sequence)
        if cutter.cut_after(position, cumulative):
            buffer.write()
    buffer.write()
    return buffer.entries


def _up_to_date(out_dir: Path, inputs: list[dict], settings: dict) -> bool:
    try:
        manifest = read_manifest(out_dir)
    except (InputError, SchemaError, KeyError):
        return False
    recorded = [(e["path"], e["sha256"]) for e in manifest.inputs]
    wanted = [(e["path"], e["sha256"]) for e in inputs]
    if recorded != wanted or manifest.settings != settings:
        return False
    return all((out_dir / s["file"]).is_file() and sha256_file(out_dir / s["file"]) == s["sha256"]
               and (out_dir / s["index"]).is_file() for s in manifest.shards)


@dataclass(frozen=True)
class Shard:
    """A loaded shard: IDs, lengths and all residues as one flat uint8 array with offsets (no copies per
    sequence), the form the search kernels consume."""

    ids: list[str]
    descriptions: list[str]
    residues: np.ndarray   # uint8 [total residues of the shard]
    offsets: np.ndarray    # int64 [n + 1]; sequence k is residues[offsets[k]:offsets[k + 1]]

    def __len__(self) -> int:
        return len(self.ids)

    def sequence(self, index: int) -> np.ndarray:
        return self.residues[self.offsets[index]:self.offsets[index + 1]]

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


def load_shard(db_dir: str | Path, index: int) -> Shard:
    """Load shard ``index`` of a database, checked against its manifest entry."""
    manifest = read_manifest(db_dir)
    if not 0 <= index < manifest.n_shards:
        raise InputError(f"shard {index} does not exist (database has {manifest.n_shards})", path=db_dir)
    table = read_table(Path(db_dir) / manifest.shards[index]["file"], SHARD)
    column = table.column("sequence").combine_chunks()
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32, count=len(column) + 1 + column.offset)
    offsets = offsets[column.offset:].astype(np.int64)
    residues = np.frombuffer(column.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    offsets -= offsets[0]
    shard = Shard(table.column("id").to_pylist(), table.column("description").to_pylist(), residues, offsets)
    if len(shard) != manifest.shards[index]["sequences"]:
        raise SchemaError(f"{db_dir}: shard {index} has {len(shard)} sequences, manifest says "
                          f"{manifest.shards[index]['sequences']}")
    return shard


def load_kmer_index(db_dir: str | Path, index: int) -> dict[str, np.ndarray]:
    """Load the k-mer index of shard ``index`` (validated against its schema)."""
    manifest = read_manifest(db_dir)
    if not 0 <= index < manifest.n_shards:
        raise InputError(f"shard {index} does not exist (database has {manifest.n_shards})", path=db_dir)
    return read_npz(Path(db_dir) / manifest.shards[index]["index"], KMER_INDEX)
