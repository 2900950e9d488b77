"""Per-item receipts: a chunk job killed halfway keeps the items it finished.

A workflow job handles a chunk of proteins (hundreds; hours of CPU for inference). Snakemake reruns a killed job
from the start, because its declared output (the chunk's statistics table) is written last. So that the rerun
redoes only what is missing, a job writes, after all of one protein's files, a small receipt
``{out_dir}/{name}.{stage}.done.json``: the *key* of the work (a fingerprint of every input file, the settings,
the trackfold version) and the protein's row of the chunk's statistics. A rerun with the same key finds the
receipt, checks that the files it lists are still there, and takes the row instead of recomputing; any
difference (another model, other settings, a changed input file, a missing output) recomputes that protein.

The receipt is written atomically after the files it vouches for, and an old receipt is removed before its
protein is recomputed, so a receipt never describes files from another computation.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from workflow_lib import __version__
from workflow_lib.seqio.atomic import write_text_atomic

RECEIPT_VERSION = 1
"""Layout of the receipt files; a receipt of another version is ignored (the protein is recomputed)."""


def file_fingerprint(path: str | Path, *, block: int = 1 << 20) -> str:
    """BLAKE2b-128 of a file's bytes (hex); the content, not the path or the modification time, so that copied
    inputs (``cp`` without ``-p``) still match. ``"missing"`` for a file that does not exist: no receipt matches
    it, so the item is computed and its reader reports the missing file as it would without receipts."""
    digest = hashlib.blake2b(digest_size=16)
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(block):
                digest.update(chunk)
    except FileNotFoundError:
        return "missing"
    return digest.hexdigest()


def directory_fingerprint(path: str | Path) -> str:
    """Fingerprint of a folder's visible files (names and :func:`file_fingerprint`, in name order), e.g. a
    template database; a single file gets its own :func:`file_fingerprint`."""
    path = Path(path)
    if not path.is_dir():
        return file_fingerprint(path)
    digest = hashlib.blake2b(digest_size=16)
    for file in sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")):
        digest.update(f"{file.name}\0{file_fingerprint(file)}\0".encode())
    return digest.hexdigest()


def receipt_path(out_dir: str | Path, name: str, stage: str) -> Path:
    """Where the receipt of ``name`` for ``stage`` lives."""
    return Path(out_dir) / f"{name}.{stage}.done.json"


def work_key(stage: str, fingerprints: Mapping[str, str], settings: Mapping[str, Any]) -> dict[str, Any]:
    """The key of one item's work: ``stage``, the :func:`file_fingerprint` of each input (role -> hex),
    ``settings`` (JSON-able) and the trackfold version."""
    return {"version": RECEIPT_VERSION, "trackfold": __version__, "stage": stage,
            "inputs": dict(sorted(fingerprints.items())),
            "settings": json.loads(json.dumps(dict(settings), sort_keys=True))}


def write_receipt(out_dir: str | Path, name: str, key: Mapping[str, Any], files: Sequence[str | Path],
                  row: Mapping[str, Any]) -> Path:
    """Write ``name``'s receipt (after ``files``, which must exist): ``key``, the files' names, the stats
    ``row``."""
    out_dir = Path(out_dir)
    names = sorted(Path(file).name for file in files)
    missing = [file for file in names if not (out_dir / file).is_file()]
    if missing:
        raise FileNotFoundError(f"{out_dir}: receipt for {name} lists files that were not written: {missing}")
    path = receipt_path(out_dir, name, key["stage"])
    write_text_atomic(path, json.dumps({"key": dict(key), "files": names, "row": dict(row)}, sort_keys=True,
                                       indent=1) + "\n")
    return path


def read_receipt(out_dir: str | Path, name: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
    """``name``'s stats row when its receipt matches ``key`` and every file it lists exists, else ``None``
    (no receipt, another key, an unreadable receipt or a missing file: the item is to be recomputed)."""
    out_dir = Path(out_dir)
    path = receipt_path(out_dir, name, key["stage"])
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("key") != json.loads(json.dumps(dict(key), sort_keys=True)):
        return None
    files = record.get("files")
    row = record.get("row")
    if not isinstance(files, list) or not isinstance(row, dict):
        return None
    if not all((out_dir / str(file)).is_file() for file in files):
        return None
    return row


def finished_row(out_dir: str | Path, name: str, key: Mapping[str, Any], *, resume: bool = True
                 ) -> dict[str, Any] | None:
    """``name``'s stats row when it may be reused (``resume`` and :func:`read_receipt` matches); otherwise its
    receipt is removed (its files are about to be rewritten) and ``None`` is returned."""
    row = read_receipt(out_dir, name, key) if resume else None
    if row is None:
        drop_receipt(out_dir, name, key["stage"])
    return row


def drop_receipt(out_dir: str | Path, name: str, stage: str) -> None:
    """Remove ``name``'s receipt (before its files are rewritten)."""
    with contextlib.suppress(FileNotFoundError):
        receipt_path(out_dir, name, stage).unlink()
