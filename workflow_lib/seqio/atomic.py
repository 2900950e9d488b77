"""Atomic writes: a killed job never leaves a file that looks complete.

Every writer in trackfold goes through :func:`atomic_path`: the content is written to a temporary file in
the destination's directory (same file system, so the final ``os.replace`` is atomic) and renamed only
after the writer returned without error and the data was flushed to disk. The file gets the permissions of any
new file (``0666`` less the umask), not the private ``0600`` of a temporary file, so that a database or result
folder on a shared file system is readable by whom the umask allows.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

_UMASK = os.umask(0o022)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK
"""The mode of every file written here: what ``open(path, "w")`` would have given."""


@contextlib.contextmanager
def atomic_path(destination: str | Path, *, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary path next to ``destination``; rename it onto ``destination`` on success.

    On any exception the temporary file is removed and ``destination`` is left untouched. ``suffix``
    defaults to the destination's own (some writers, e.g. numpy, look at the extension).
    """
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=(suffix if suffix is not None
                                                                           else "".join(destination.suffixes)) + ".tmp",
                                    dir=destination.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, destination)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def write_text_atomic(destination: str | Path, text: str) -> None:
    """Write a text file atomically (UTF-8)."""
    with atomic_path(destination) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes_atomic(destination: str | Path, data: bytes) -> None:
    """Write a binary file atomically."""
    with atomic_path(destination) as tmp:
        tmp.write_bytes(data)
