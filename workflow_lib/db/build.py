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
``ID__2``, ``ID__3``, … (``duplicate_ids="rename"``, the default) or stops the build
(``duplicate_ids="error"``). The manifest counts both.

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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from workflow_lib.db.kmer_index import DEFAULT_SHAPE, build_kmer_index, shape_offsets
from workflow_lib.errors import InputError, SchemaError
from workflow_lib.schemas.db import KMER_INDEX, SHARD
from workflow_lib.schemas.io import read_npz, read_table, write_npz, write_table
from workflow_lib.seqio.alphabet import encode
from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.seqio.fasta import BadRecord, iter_fasta

FORMAT_VERSION = 2  # 2: shards carry a k-mer index
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


def _split_points(lengths: np.ndarray, n_shards: int) -> list[int]:
    """Start index of each shard: contiguous runs with about equal residue sums (every shard non-empty)."""
    cumulative = np.cumsum(lengths)
    targets = cumulative[-1] * np.arange(1, n_shards) / n_shards
    cuts = np.searchsorted(cumulative, targets, side="left") + 1
    starts = [0]
    for cut in cuts:  # keep cuts strictly increasing and leave room for the remaining shards
        starts.append(int(min(max(cut, starts[-1] + 1), len(lengths) - (n_shards - len(starts)))))
    return starts


DUPLICATE_POLICIES = ("rename", "error")
BAD_RECORD_POLICIES = ("skip", "error")
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


def build_database(fasta_paths: Sequence[str | Path], out_dir: str | Path, *, shards: int = 1,
                   duplicate_ids: str = "rename", on_bad_record: str = "skip", seed_shape: str = DEFAULT_SHAPE,
                   force: bool = False) -> tuple[Manifest, bool]:
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

    ids, descriptions, codes = [], [], []
    first_seen: dict[str, tuple[str, str]] = {}  # id -> (file, sequence)
    used_ids: set[str] = set()
    for entry in inputs:
        count = residues = dropped = renamed = 0
        bad = BadRecords()
        for record in iter_fasta(entry["path"], allow_duplicates=True,
                                 on_bad_record=bad if on_bad_record == "skip" else None):
            identifier = record.id
            if identifier in first_seen:
                earlier_file, earlier_sequence = first_seen[identifier]
                if earlier_sequence == record.sequence:
                    dropped += 1
                    continue
                if duplicate_ids == "error":
                    raise InputError(f"duplicate ID with a different sequence (first in {earlier_file})",
                                     path=entry["path"], record=identifier)
                copy = 2
                while f"{identifier}__{copy}" in used_ids:
                    copy += 1
                identifier = f"{identifier}__{copy}"
                renamed += 1
            else:
                first_seen[identifier] = (entry["path"], record.sequence)
            used_ids.add(identifier)
            ids.append(identifier)
            descriptions.append(record.description)
            codes.append(encode(record.sequence))
            count += 1
            residues += len(record.sequence)
        entry.update(sequences=count, residues=residues, duplicates_dropped=dropped, duplicates_renamed=renamed,
                     bad_records=bad.count, bad_record_examples=bad.examples)
        if bad.count:
            LOG.warning("%s: %d bad records skipped (listed in the manifest)", entry["path"], bad.count)

    lengths = np.fromiter((c.size for c in codes), dtype=np.int64, count=len(codes))
    n_shards = min(shards, len(codes))
    starts = _split_points(lengths, n_shards) + [len(codes)]
    shard_entries = []
    for index in range(n_shards):
        lo, hi = starts[index], starts[index + 1]
        table = pa.table({
            "id": pa.array(ids[lo:hi], pa.string()),
            "description": pa.array(descriptions[lo:hi], pa.string()),
            "sequence": pa.array([c.tobytes() for c in codes[lo:hi]], pa.binary()),
            "length": pa.array(lengths[lo:hi].astype(np.int32), pa.int32()),
        })
        path = out_dir / shard_name(index)
        write_table(path, table, SHARD)
        flat = np.concatenate(codes[lo:hi])
        offsets = np.concatenate([[0], np.cumsum(lengths[lo:hi])]).astype(np.int64)
        write_npz(out_dir / index_name(index), build_kmer_index(flat, offsets, shape=seed_shape), KMER_INDEX)
        shard_entries.append({"file": shard_name(index), "index": index_name(index), "sequences": hi - lo,
                              "residues": int(lengths[lo:hi].sum()), "sha256": sha256_file(path)})
    current = {name for s in shard_entries for name in (s["file"], s["index"])}
    for stale in list(out_dir.glob("shard_*.parquet")) + list(out_dir.glob("shard_*.kmer.npz")):
        if stale.name not in current:
            stale.unlink()
    manifest = Manifest(FORMAT_VERSION, len(codes), int(lengths.sum()), tuple(shard_entries),
                        tuple(inputs), settings)
    write_text_atomic(out_dir / MANIFEST, manifest.to_json())  # written last: its presence means complete
    LOG.info("built %s: %d sequences, %d residues, %d shards", out_dir, manifest.total_sequences,
             manifest.total_residues, n_shards)
    return manifest, True


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
