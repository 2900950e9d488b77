"""Profile databases: a sequence database clustered, one profile HMM per cluster (HHblits' Uniclust30 form).

HHblits (Remmert et al. 2012, Nat. Methods 9:173) searches a database of cluster profiles with profile–profile Viterbi
and expands each accepted cluster into its member sequences. ``trackfold db cluster`` makes such a database from
a ``trackfold db build`` directory (:func:`build_profile_db`):

1. cluster the sequences (:mod:`workflow_lib.db.cluster`: Linclust-style, default 30% identity over 80% of both
   sequences; linear in the database size);
2. per cluster, the A3M of its members aligned to the representative;
3. shards (contiguous runs of clusters of about equal residue counts), each three files:
   ``profiles_NNN.npz`` (:data:`~workflow_lib.schemas.db.PROFILE_DB_ARRAYS`: representative sequences, member
   counts), ``members_NNN.parquet`` (:data:`~workflow_lib.schemas.db.PROFILE_DB_MEMBERS`: every member's A3M row
   against its representative) and ``index_NNN.npz`` (the representatives' k-mer index,
   :data:`~workflow_lib.schemas.db.KMER_INDEX`, for the prefilter);
4. ``manifest.json`` last (atomically): ``"kind": "profile_database"``, counts, settings, the source database's
   manifest digest and every file's SHA-256. A rebuild from the same source and settings is a no-op.

The profile database keeps every sequence of its source (as a member), so an MSA built from it can hold the same
rows as one built from the sequence database.

**Cluster profiles** are built when a search first needs them (:meth:`ProfileShard.profile`, kept in an LRU
cache), from the cluster's A3M (:func:`~workflow_lib.aligner.profile_from_alignment`) with substitution
pseudocounts at :data:`DB_ADMIX`: a search touches a few hundred clusters per query, and stored profiles would
cost about 70 bytes per residue (12 GB for UniProt-2014). The cache is bounded in bytes, not entries
(:data:`PROFILE_CACHE_BYTES` for the whole database, each shard its equal part: a profile and its score tables
take about 470 bytes per residue, and a bound on the count of clusters per shard let one search against
UniProt-2014 grow to many gigabytes; a small database such as SCOP's stays whole in the cache). The database
side gets lighter pseudocounts (:data:`DB_ADMIX`) than a query (admix 0.9): on the SCOP benchmark's first
iteration (``benchmarks/remote_homology.py``) database profiles at the query's admix ranked remote homologs
lower than lighter ones, and :data:`DB_ADMIX` gave fewer false hits than lighter still.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path

import numpy as np
import pandas as pd

from workflow_lib.aligner import Profile, profile_from_alignment
from workflow_lib.aligner.scores import PairScores, pair_scores
from workflow_lib.aligner.substitution import DEFAULT_BACKGROUND
from workflow_lib.db.build import MANIFEST, load_shard, read_manifest, sha256_file
from workflow_lib.db.cluster import DEFAULT_COVERAGE, DEFAULT_IDENTITY, cluster_sequences
from workflow_lib.db.kmer_index import DEFAULT_SHAPE, build_kmer_index
from workflow_lib.errors import InputError, SchemaError
from workflow_lib.schemas.db import KMER_INDEX, PROFILE_DB_ARRAYS, PROFILE_DB_MEMBERS
from workflow_lib.schemas.io import read_frame, read_npz, write_npz, write_table
from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.seqio.msa import Alignment

DB_ADMIX = 0.4
"""Emission pseudocount admixture of database cluster profiles (module docstring)."""
PROFILE_CACHE_BYTES = 2 * 2**30
"""Bytes of cluster profiles and their score tables kept between queries for a whole profile database, split
equally among its shards (least recently used evicted first)."""
KIND = "profile_database"
FORMAT_VERSION = 1


def database_kind(db_dir: str | Path) -> str:
    """``"profile_database"`` for a ``db cluster`` directory, ``"sequence_database"`` for a ``db build`` one."""
    path = Path(db_dir) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("no database manifest here; build it with 'trackfold db build' (or 'db cluster')",
                         path=path) from None
    except json.JSONDecodeError as error:
        raise SchemaError(f"{path}: not valid JSON (truncated?): {error}") from None
    return str(data.get("kind", "sequence_database"))


def profiles_name(index: int) -> str:
    return f"profiles_{index:03d}.npz"


def members_name(index: int) -> str:
    return f"members_{index:03d}.parquet"


def index_file_name(index: int) -> str:
    return f"index_{index:03d}.npz"


def _settings(identity: float, coverage: float, shards: int) -> dict:
    return {"identity": identity, "coverage": coverage, "shards": shards, "seed_shape": DEFAULT_SHAPE,
            "format_version": FORMAT_VERSION}


def _up_to_date(out_dir: Path, source: str, settings: dict) -> bool:
    path = out_dir / MANIFEST
    if not path.is_file():
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return False
    if data.get("kind") != KIND or data.get("source_manifest_sha256") != source or data.get("settings") != settings:
        return False
    return all((out_dir / name).is_file() and sha256_file(out_dir / name) == digest
               for name, digest in data.get("files", {}).items())


def _shard_bounds(lengths: np.ndarray, shards: int) -> list[tuple[int, int]]:
    """Contiguous cluster ranges of about equal residue counts (at most ``shards``, none empty)."""
    shards = max(1, min(shards, lengths.size))
    cumulative = np.cumsum(lengths)
    cuts = np.searchsorted(cumulative, cumulative[-1] * np.arange(1, shards) / shards, side="right")
    edges = np.unique(np.concatenate([[0], cuts, [lengths.size]]))
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def build_profile_db(seq_db: str | Path, out_dir: str | Path, *, identity: float = DEFAULT_IDENTITY,
                     coverage: float = DEFAULT_COVERAGE, shards: int | None = None, cpus: int | None = 1,
                     force: bool = False) -> tuple[dict, bool]:
    """Cluster the sequence database ``seq_db`` into a profile database at ``out_dir`` (module docstring);
    returns ``(manifest, rebuilt)``. ``shards``: None = as many as the source database has."""
    seq_db, out_dir = Path(seq_db), Path(out_dir)
    source = read_manifest(seq_db)
    shards = source.n_shards if shards is None else shards
    if shards < 1:
        raise InputError(f"number of shards must be at least 1, got {shards}")
    settings = _settings(identity, coverage, shards)
    source_digest = sha256_file(seq_db / MANIFEST)
    if not force and _up_to_date(out_dir, source_digest, settings):
        return json.loads((out_dir / MANIFEST).read_text(encoding="utf-8")), False
    started = time.perf_counter()
    ids: list[str] = []
    descriptions: list[str] = []
    sequences: list[np.ndarray] = []
    for k in range(source.n_shards):
        shard = load_shard(seq_db, k)
        ids.extend(shard.ids)
        descriptions.extend(shard.descriptions)
        sequences.extend(shard.sequence(j).copy() for j in range(len(shard)))
    if not sequences:
        raise InputError("the sequence database is empty", path=seq_db)
    clustering = cluster_sequences(sequences, identity=identity, coverage=coverage, cpus=cpus)
    clustered = time.perf_counter() - started
    representative = clustering.representative
    reps = np.flatnonzero(representative == np.arange(representative.size))
    members_of: dict[int, list[int]] = {int(r): [int(r)] for r in reps}
    for k in np.flatnonzero(representative != np.arange(representative.size)):
        members_of[int(representative[k])].append(int(k))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MANIFEST).unlink(missing_ok=True)   # the manifest marks a complete database: it goes first
    files: dict[str, str] = {}
    shard_entries = []
    rep_lengths = np.array([sequences[r].size for r in reps], dtype=np.int64)
    for number, (lo, hi) in enumerate(_shard_bounds(rep_lengths, shards)):
        arrays, rows = _shard_arrays(reps[lo:hi], members_of, ids, descriptions, sequences, clustering)
        index = build_kmer_index(arrays["residues"], arrays["offsets"], shape=DEFAULT_SHAPE)
        names = (profiles_name(number), members_name(number), index_file_name(number))
        write_npz(out_dir / names[0], arrays, PROFILE_DB_ARRAYS)
        write_table(out_dir / names[1], pd.DataFrame(rows), PROFILE_DB_MEMBERS)
        write_npz(out_dir / names[2], index, KMER_INDEX)
        for name in names:
            files[name] = sha256_file(out_dir / name)
        shard_entries.append({"profiles": names[0], "members": names[1], "index": names[2], "clusters": hi - lo,
                              "sequences": len(rows), "residues": int(rep_lengths[lo:hi].sum())})
    manifest = {
        "kind": KIND, "format_version": FORMAT_VERSION, "clusters": int(reps.size),
        "sequences": len(sequences), "residues": int(sum(s.size for s in sequences)),
        "representative_residues": int(rep_lengths.sum()), "shards": shard_entries, "settings": settings,
        "source": str(seq_db), "source_manifest_sha256": source_digest, "files": files,
        "build": {"candidate_edges": clustering.edges, "cluster_seconds": round(clustered, 1),
                  "seconds": round(time.perf_counter() - started, 1)},
    }
    write_text_atomic(out_dir / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return manifest, True


def _shard_arrays(reps: np.ndarray, members_of: dict[int, list[int]], ids: list[str], descriptions: list[str],
                  sequences: list[np.ndarray], clustering) -> tuple[dict, list[dict]]:
    residues, counts, table = [], [], []
    for cluster, rep in enumerate(reps):
        members = members_of[int(rep)]
        residues.append(sequences[int(rep)])
        counts.append(len(members))
        table.extend({"cluster": cluster, "id": ids[m], "description": descriptions[m], "row": clustering.rows[m],
                      "start": int(clustering.starts[m]), "length": int(sequences[m].size)} for m in members)
    lengths = np.array([r.size for r in residues], dtype=np.int64)
    arrays = {
        "residues": np.concatenate(residues).astype(np.uint8),
        "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        "members": np.array(counts, dtype=np.int32),
    }
    return arrays, table


def read_profile_manifest(db_dir: str | Path) -> dict:
    """Load and check a profile database's manifest (kind, format version, shard counts)."""
    path = Path(db_dir) / MANIFEST
    if database_kind(db_dir) != KIND:
        raise InputError("not a profile database (build one with 'trackfold db cluster')", path=path)
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("format_version") != FORMAT_VERSION:
        raise SchemaError(f"{path}: profile database format {data.get('format_version')!r}, this trackfold reads "
                          f"{FORMAT_VERSION}; rebuild it with 'trackfold db cluster'")
    if sum(s["clusters"] for s in data["shards"]) != data["clusters"] or \
            sum(s["sequences"] for s in data["shards"]) != data["sequences"]:
        raise SchemaError(f"{path}: shard counts do not add up to the totals")
    return data


def array_bytes(value) -> int:
    """Bytes of the NumPy arrays ``value`` holds: itself, the items of a tuple, or a dataclass's fields (one
    level down)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, tuple):
        return sum(array_bytes(item) for item in value)
    if dataclasses.is_dataclass(value):
        return sum(int(item.nbytes) for item in vars(value).values() if isinstance(item, np.ndarray))
    return 0


class ByteBoundedCache:
    """``compute(key)`` memoised, least recently used first out, holding at most ``max_bytes`` of arrays
    (:func:`array_bytes`); a value larger than the bound is returned and not kept."""

    def __init__(self, compute: Callable, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be non-negative, got {max_bytes}")
        self._compute = compute
        self.max_bytes = int(max_bytes)
        self._items: OrderedDict = OrderedDict()
        self.nbytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def __call__(self, key: Hashable):
        item = self._items.get(key)
        if item is not None:
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]
        self.misses += 1
        value = self._compute(key)
        size = array_bytes(value)
        if size <= self.max_bytes:
            self._items[key] = (value, size)
            self.nbytes += size
            while self.nbytes > self.max_bytes:
                _, (_, evicted) = self._items.popitem(last=False)
                self.nbytes -= evicted
        return value


class ProfileShard:
    """One loaded shard of a profile database: representatives, members, k-mer index; cluster profiles on demand."""

    def __init__(self, arrays: dict[str, np.ndarray], members: pd.DataFrame, index: dict[str, np.ndarray],
                 cache_bytes: int = PROFILE_CACHE_BYTES) -> None:
        self.arrays = arrays
        self.members = members
        self.index = index
        starts = np.concatenate([[0], np.cumsum(arrays["members"])]).astype(np.int64)
        self._member_starts = starts
        self._rows = members["row"].tolist()
        self._ids = members["id"].tolist()
        self.cache = ByteBoundedCache(self._cluster, cache_bytes)

    def profile(self, k: int) -> Profile:
        """Cluster ``k``'s profile (built on first use, then cached)."""
        return self.cache(int(k))[0]

    def scores(self, k: int) -> PairScores:
        """The profile–profile tables of cluster ``k`` against the default background (a query profile's)."""
        return self.cache(int(k))[1]

    def _cluster(self, k: int) -> tuple[Profile, PairScores]:
        profile = self._profile(k)
        return profile, pair_scores(profile, DEFAULT_BACKGROUND)

    def __len__(self) -> int:
        return int(self.arrays["offsets"].size - 1)

    def member_span(self, k: int) -> tuple[int, int]:
        """Rows ``[start, stop)`` of cluster ``k`` in :attr:`members` (representative first)."""
        return int(self._member_starts[k]), int(self._member_starts[k + 1])

    def _profile(self, k: int) -> Profile:
        start, stop = self.member_span(k)
        alignment = Alignment.from_a3m_rows(self._ids[start:stop], [""] * (stop - start), self._rows[start:stop])
        return profile_from_alignment(alignment, name=self._ids[start], admix=DB_ADMIX)


def load_profile_shard(db_dir: str | Path, number: int, manifest: dict | None = None) -> ProfileShard:
    """Load shard ``number`` of a profile database (its files checked against the manifest's counts)."""
    db_dir = Path(db_dir)
    manifest = manifest or read_profile_manifest(db_dir)
    if not 0 <= number < len(manifest["shards"]):
        raise InputError(f"shard {number} does not exist (profile database has {len(manifest['shards'])})",
                         path=db_dir)
    entry = manifest["shards"][number]
    arrays = read_npz(db_dir / entry["profiles"], PROFILE_DB_ARRAYS)
    members = read_frame(db_dir / entry["members"], PROFILE_DB_MEMBERS)
    if arrays["offsets"].size - 1 != entry["clusters"] or len(members) != entry["sequences"] or \
            int(arrays["members"].sum()) != len(members):
        raise SchemaError(f"{db_dir}: shard {number} does not hold the clusters and members its manifest lists")
    return ProfileShard(arrays, members, read_npz(db_dir / entry["index"], KMER_INDEX),
                        cache_bytes=PROFILE_CACHE_BYTES // len(manifest["shards"]))
