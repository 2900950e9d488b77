"""Argument helpers shared by the stage CLIs: argparse types and the one-output-per-input check."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable

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
