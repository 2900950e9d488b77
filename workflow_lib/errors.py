"""The exception hierarchy of trackfold.

Every error a user can cause by handing us bad data is an :class:`InputError` whose message names the file,
the record and the problem, so that a failing Snakemake job says what to fix without reading a traceback.
"""

from __future__ import annotations

from pathlib import Path


class TrackfoldError(Exception):
    """Base class of every error raised on purpose by trackfold."""


class InputError(TrackfoldError, ValueError):
    """Bad user-supplied data: a malformed file, a record that breaks the input policy, an unknown key.

    The message reads ``{file}: record '{record}': {problem}`` (file and record are left out when unknown).
    """

    def __init__(self, problem: str, *, path: str | Path | None = None, record: str | None = None,
                 position: int | None = None) -> None:
        self.path = str(path) if path is not None else None
        self.record = record
        self.position = position
        self.problem = problem
        parts = []
        if self.path is not None:
            parts.append(self.path)
        if record is not None:
            parts.append(f"record '{record}'")
        if position is not None:
            parts.append(f"position {position}")
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {problem}" if prefix else problem)


class SchemaError(TrackfoldError, ValueError):
    """A table or array that does not match its declared schema (often a truncated or foreign file)."""


class ToolError(TrackfoldError, RuntimeError):
    """An external program or an internal stage failed for reasons other than the user's input."""
