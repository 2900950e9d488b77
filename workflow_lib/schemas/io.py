"""The declaration types and the validating, atomic reader and writer every data contract uses.

Tables are Parquet with a pyarrow schema and a ``trackfold.schema`` metadata entry (``name/version``); arrays
are npz files (``allow_pickle=False``) whose keys, dtypes and named dimensions are declared by an
:class:`NpzSchema`. Readers check the declaration and raise :class:`~workflow_lib.errors.SchemaError` naming
the file, so a truncated or foreign file is never taken for a good one. The declarations themselves live in
the family modules of :mod:`workflow_lib.schemas`.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping, Sequence
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
              compressed: bool = True, compresslevel: int | None = None) -> None:
    """Validate ``arrays`` against ``spec`` and write them as npz, atomically.

    ``compresslevel`` (1-9, with ``compressed``): zlib's level for every array; None is ``np.savez_compressed``'s
    (zlib's default, 6). Any level reads back the same with ``np.load``; 1-3 are zlib's fast strategy, about 3x
    faster than 6 on feature files for about a tenth more bytes."""
    checked = spec.validate(arrays, str(path))
    checked["__schema__"] = np.array(spec.tag)
    with atomic_path(path, suffix=".npz") as tmp:
        with open(tmp, "wb") as handle:
            if not compressed or compresslevel is None:
                (np.savez_compressed if compressed else np.savez)(handle, **checked)
                return
            with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=compresslevel,
                                 allowZip64=True) as archive:
                for name, value in checked.items():
                    with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


def read_npz(path: str | Path, spec: NpzSchema, *, older: Sequence[NpzSchema] = ()) -> dict[str, np.ndarray]:
    """Load an npz written by :func:`write_npz` (no pickle) and validate it against ``spec``, or against the
    one of ``older`` (earlier layouts still read) whose tag it carries."""
    path = Path(path)
    if not path.exists():
        raise SchemaError(f"{path}: file does not exist (expected arrays '{spec.tag}')")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as error:
        raise SchemaError(f"{path}: not a readable npz file (truncated or corrupted?): {error}") from None
    tag = str(arrays.pop("__schema__", ""))
    for candidate in (spec, *older):
        if tag == candidate.tag:
            return candidate.validate(arrays, str(path))
    raise SchemaError(f"{path}: expected arrays '{spec.tag}', found '{tag or 'no trackfold schema tag'}'")


