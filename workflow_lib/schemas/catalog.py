"""Every declared table and array layout by name: what a reader uses to recognise any file the workflow wrote.

Importing this module imports every family (``structure`` and its Biopython reader included, through the
feature layout's geometry bins), so stage code imports the one family it needs instead.
"""

from __future__ import annotations

from workflow_lib.schemas import db, evaluation, features, prediction, report, search, templates, training
from workflow_lib.schemas.io import NpzSchema, TableSchema

FAMILIES = (db, search, templates, features, prediction, report, training, evaluation)
"""The family modules, in the order the workflow writes their files."""


def _declared(kind: type) -> dict[str, TableSchema | NpzSchema]:
    """The newest layout of each name: a family may keep an earlier version of a layout that its readers still
    accept (``features.FEATURES_V5``); two layouts of one name and version are an error."""
    found: dict[str, TableSchema | NpzSchema] = {}
    for module in FAMILIES:
        for value in vars(module).values():
            if isinstance(value, kind):
                known = found.get(value.name)
                if known is not None and known is not value and known.version == value.version:
                    raise RuntimeError(f"two layouts are named {value.name!r}")
                if known is None or value.version > known.version:
                    found[value.name] = value
    return found


TABLES: dict[str, TableSchema] = _declared(TableSchema)
"""Parquet layouts by name (the name half of a file's ``trackfold.schema`` tag)."""

ARRAYS: dict[str, NpzSchema] = _declared(NpzSchema)
"""npz layouts by name (the name half of a file's ``__schema__`` entry)."""
