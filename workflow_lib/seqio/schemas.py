"""Every table and array that passes between stages, declared once, with validating atomic I/O.

Tables are Parquet with a pyarrow schema and a ``trackfold.schema`` metadata entry (``name/version``); arrays
are npz files (``allow_pickle=False``) whose keys, dtypes and named dimensions are declared by an
:class:`NpzSchema`. Readers check the declaration and raise :class:`~workflow_lib.errors.SchemaError` naming
the file, so a truncated or foreign file is never taken for a good one. Later stages add their declarations
here, next to the others.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from workflow_lib.errors import SchemaError
from workflow_lib.seqio.atomic import atomic_path

SCHEMA_KEY = b"trackfold.schema"


@dataclass(frozen=True)
class TableSchema:
    """A named, versioned Parquet table layout."""

    name: str
    version: int
    schema: pa.Schema
    doc: str

    @property
    def tag(self) -> bytes:
        return f"{self.name}/{self.version}".encode()


SHARD = TableSchema("db_shard", 1, pa.schema([
    ("id", pa.string()),
    ("description", pa.string()),
    ("sequence", pa.binary()),       # uint8 residue codes (workflow_lib.seqio.alphabet)
    ("length", pa.int32()),
]), "One database shard: sequences as residue codes, in database order.")

CHUNKS = TableSchema("chunks", 1, pa.schema([
    ("proteome", pa.string()),
    ("chunk", pa.int32()),
    ("protein", pa.string()),        # ID as in the FASTA (first word of the header)
    ("safe_id", pa.string()),        # file-name-safe ID used in every output path
    ("length", pa.int32()),
    ("index", pa.int32()),           # position of the protein in its FASTA file
    ("note", pa.string()),           # empty, or why the protein is in no chunk (chunk = -1)
]), "Proteins of one proteome and the length-balanced chunk each belongs to (-1: skipped, see note).")

HITS = TableSchema("hits", 2, pa.schema([
    ("query", pa.string()),
    ("target", pa.string()),
    ("evalue", pa.float64()),
    ("bitscore", pa.float32()),
    ("qstart", pa.int32()),          # 1-based, inclusive
    ("qend", pa.int32()),
    ("tstart", pa.int32()),
    ("tend", pa.int32()),
    ("qlen", pa.int32()),
    ("tlen", pa.int32()),
    ("identity", pa.float32()),      # identical / aligned columns
    ("aligned_cols", pa.int32()),
    ("alignment", pa.string()),      # state string: M (match), I (insert in target), D (deletion in target)
    ("iteration", pa.int16()),
    ("database", pa.string()),
    ("tseq", pa.string()),           # target residues tstart..tend (the aligned segment, for building A3M rows)
]), "Search hits: one row per query-target alignment.")

SEARCH_TIMES = TableSchema("search_times", 1, pa.schema([
    ("query", pa.string()),
    ("iteration", pa.int16()),
    ("shard", pa.int32()),
    ("seconds", pa.float64()),       # prefilter + Viterbi + calibration time of this query on this shard
    ("candidates", pa.int64()),      # targets with a seeded diagonal
    ("gapless", pa.int64()),         # passed the gapless stage
    ("gapped", pa.int64()),          # passed the gapped stage (aligned by Viterbi)
]), "Per query and shard: search time and prefilter counts.")

MSA_STATE = TableSchema("msa_state", 1, pa.schema([
    ("protein", pa.string()),        # FASTA ID
    ("safe_id", pa.string()),
    ("length", pa.int32()),
    ("iteration", pa.int16()),       # iteration that produced the current MSA (0: precomputed)
    ("converged", pa.bool_()),
    ("reason", pa.string()),         # why it stopped (empty while searching)
    ("depth", pa.int32()),           # sequences in the filtered MSA, query included
    ("included", pa.int32()),        # targets with E <= inclusion threshold in the last search
    ("neff", pa.float32()),
    ("coverage", pa.float32()),      # fraction of query columns covered by at least one other sequence
    ("seconds", pa.float64()),       # search time summed over shards and iterations
    ("a3m", pa.string()),            # file holding the current MSA
    ("source", pa.string()),         # search | precomputed
]), "Per protein: the state of its iterative MSA after an iteration (the workflow's hand-over between jobs).")

MSA_STATS = TableSchema("msa_stats", 1, pa.schema([
    ("protein", pa.string()),
    ("safe_id", pa.string()),
    ("length", pa.int32()),
    ("depth", pa.int32()),
    ("neff", pa.float32()),
    ("coverage", pa.float32()),
    ("mean_coverage", pa.float32()), # mean fraction of query columns covered per non-query sequence
    ("iterations", pa.int16()),
    ("reason", pa.string()),
    ("seconds", pa.float64()),
    ("source", pa.string()),
]), "Per protein: statistics of its final MSA.")

TABLES = {t.name: t for t in (SHARD, CHUNKS, HITS, SEARCH_TIMES, MSA_STATE, MSA_STATS)}


def _coerce(frame: pd.DataFrame | pa.Table, spec: TableSchema, where: str) -> pa.Table:
    table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
    expected = [f.name for f in spec.schema]
    missing = [c for c in expected if c not in table.column_names]
    extra = [c for c in table.column_names if c not in expected]
    if missing or extra:
        raise SchemaError(f"{where}: table '{spec.name}' columns differ from the declaration "
                          f"(missing {missing}, unexpected {extra})")
    try:
        return table.select(expected).cast(spec.schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as error:
        raise SchemaError(f"{where}: table '{spec.name}' has a column of the wrong type: {error}") from None


def write_table(path: str | Path, frame: pd.DataFrame | pa.Table, spec: TableSchema) -> None:
    """Validate ``frame`` against ``spec`` and write it as Parquet, atomically."""
    table = _coerce(frame, spec, str(path))
    metadata = dict(table.schema.metadata or {})
    metadata[SCHEMA_KEY] = spec.tag
    table = table.replace_schema_metadata(metadata)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def read_table(path: str | Path, spec: TableSchema, *, columns: list[str] | None = None) -> pa.Table:
    """Read a Parquet table written by :func:`write_table` and check it is ``spec``."""
    path = Path(path)
    if not path.exists():
        raise SchemaError(f"{path}: file does not exist (expected table '{spec.name}')")
    try:
        table = pq.read_table(path, columns=columns)
    except (pa.ArrowInvalid, OSError) as error:
        raise SchemaError(f"{path}: not a readable Parquet file (truncated or corrupted?): {error}") from None
    tag = (table.schema.metadata or {}).get(SCHEMA_KEY)
    if tag != spec.tag:
        raise SchemaError(f"{path}: expected table '{spec.tag.decode()}', found "
                          f"'{tag.decode() if tag else 'no trackfold schema tag'}'")
    wanted = spec.schema if columns is None else pa.schema([spec.schema.field(c) for c in columns])
    if not table.schema.remove_metadata().equals(wanted):
        raise SchemaError(f"{path}: columns do not match table '{spec.name}'")
    return table


def read_frame(path: str | Path, spec: TableSchema, *, columns: list[str] | None = None) -> pd.DataFrame:
    """:func:`read_table` as a pandas DataFrame."""
    return read_table(path, spec, columns=columns).to_pandas()


@dataclass(frozen=True)
class ArraySpec:
    """One npz key: dtype and named dimensions (a dimension named by an int is fixed)."""

    dtype: str
    dims: tuple[str | int, ...]
    doc: str = ""
    optional: bool = False


@dataclass(frozen=True)
class NpzSchema:
    """A named, versioned npz layout; named dimensions must agree across keys."""

    name: str
    version: int
    arrays: Mapping[str, ArraySpec]
    doc: str = ""

    @property
    def tag(self) -> str:
        return f"{self.name}/{self.version}"

    def validate(self, arrays: Mapping[str, np.ndarray], where: str) -> dict[str, np.ndarray]:
        sizes: dict[str, int] = {}
        out: dict[str, np.ndarray] = {}
        unknown = sorted(set(arrays) - set(self.arrays) - {"__schema__"})
        if unknown:
            raise SchemaError(f"{where}: unexpected keys {unknown} for '{self.tag}'")
        for key, spec in self.arrays.items():
            if key not in arrays:
                if spec.optional:
                    continue
                raise SchemaError(f"{where}: key '{key}' missing (schema '{self.tag}')")
            value = np.asarray(arrays[key])
            if value.dtype == object:
                raise SchemaError(f"{where}: key '{key}' is an object array; trackfold never pickles")
            if value.dtype != np.dtype(spec.dtype):
                raise SchemaError(f"{where}: key '{key}' has dtype {value.dtype}, declared {spec.dtype}")
            if value.ndim != len(spec.dims):
                raise SchemaError(f"{where}: key '{key}' has {value.ndim} dimensions, declared {spec.dims}")
            for dim, size in zip(spec.dims, value.shape):
                if isinstance(dim, int):
                    if size != dim:
                        raise SchemaError(f"{where}: key '{key}' has size {size} where {dim} is declared")
                elif sizes.setdefault(dim, size) != size:
                    raise SchemaError(f"{where}: key '{key}' has {dim}={size}, other keys {dim}={sizes[dim]}")
            out[key] = value
        return out


def write_npz(path: str | Path, arrays: Mapping[str, np.ndarray], spec: NpzSchema, *,
              compressed: bool = True) -> None:
    """Validate ``arrays`` against ``spec`` and write them as npz, atomically."""
    checked = spec.validate(arrays, str(path))
    checked["__schema__"] = np.array(spec.tag)
    with atomic_path(path, suffix=".npz") as tmp:
        with open(tmp, "wb") as handle:
            (np.savez_compressed if compressed else np.savez)(handle, **checked)


def read_npz(path: str | Path, spec: NpzSchema) -> dict[str, np.ndarray]:
    """Load an npz written by :func:`write_npz` (no pickle) and validate it against ``spec``."""
    path = Path(path)
    if not path.exists():
        raise SchemaError(f"{path}: file does not exist (expected arrays '{spec.tag}')")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as error:
        raise SchemaError(f"{path}: not a readable npz file (truncated or corrupted?): {error}") from None
    tag = str(arrays.pop("__schema__", ""))
    if tag != spec.tag:
        raise SchemaError(f"{path}: expected arrays '{spec.tag}', found '{tag or 'no trackfold schema tag'}'")
    return spec.validate(arrays, str(path))


def _stage_declarations() -> None:
    """Re-export the declarations that live with their stage, so this module lists every contract."""
    from workflow_lib.features.schema import FEATURES
    from workflow_lib.db.kmer_index import KMER_INDEX
    from workflow_lib.templates.schema import TEMPLATE_ARRAYS, TEMPLATE_CHAINS, TEMPLATE_HITS

    globals().update(FEATURES=FEATURES, KMER_INDEX=KMER_INDEX, TEMPLATE_ARRAYS=TEMPLATE_ARRAYS,
                     TEMPLATE_CHAINS=TEMPLATE_CHAINS, TEMPLATE_HITS=TEMPLATE_HITS)


def __getattr__(name: str):  # lazy: the stage modules import this one
    if name in ("FEATURES", "KMER_INDEX", "TEMPLATE_ARRAYS", "TEMPLATE_CHAINS", "TEMPLATE_HITS"):
        _stage_declarations()
        return globals()[name]
    raise AttributeError(name)
