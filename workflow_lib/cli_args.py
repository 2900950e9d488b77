"""Argument helpers shared by the stage CLIs: argparse types and the one-output-per-input check."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from pathlib import Path

from workflow_lib.errors import InputError


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer of at least 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def unique_outputs(paths: Iterable[str], name_of: Callable[[str], str], suffix: str) -> dict[str, str]:
    """``{output name: input path}``; two inputs that would write the same ``{name}{suffix}`` are an error."""
    names: dict[str, str] = {}
    for path in paths:
        name = name_of(path)
        if name in names:
            raise InputError(f"writes the same {name}{suffix} as {names[name]}", path=path)
        names[name] = path
    return names


def add_chunk_options(parser: argparse.ArgumentParser, inputs: str) -> None:
    """``--chunk-plan PLAN --chunk N``: the inputs are the chunk's proteins in the given folder (see
    :func:`chunk_inputs`), so a job over thousands of proteins needs no command line of thousands of paths."""
    parser.add_argument("--chunk-plan", help=f"chunk table (trackfold chunk); with --chunk, each positional "
                                              f"argument is a folder of {inputs} and the chunk's proteins are read")
    parser.add_argument("--chunk", type=int, help="the chunk number in --chunk-plan")


def chunk_inputs(paths: list[str], plan: str | None, chunk: int | None, suffix: str) -> list[str]:
    """``paths`` as given, or with ``--chunk-plan``/``--chunk`` the files ``{folder}/{safe_id}{suffix}`` of the
    chunk's proteins (sorted by safe ID) in the one folder given."""
    if plan is None and chunk is None:
        return paths
    if plan is None or chunk is None:
        raise InputError("--chunk-plan and --chunk go together")
    if len(paths) != 1 or not Path(paths[0]).is_dir():
        raise InputError(f"with --chunk-plan, give one folder of {suffix} files", path=paths[0] if paths else None)
    from workflow_lib.schemas.db import CHUNKS
    from workflow_lib.schemas.io import read_frame

    table = read_frame(plan, CHUNKS)
    members = sorted(str(s) for s in table.loc[table["chunk"] == chunk, "safe_id"])
    if not members:
        raise InputError(f"chunk {chunk} holds no protein", path=plan)
    return [str(Path(paths[0]) / f"{member}{suffix}") for member in members]
