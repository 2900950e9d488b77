"""The configuration tables of docs/configuration.md and the README state the schema's defaults (the library's and
the command line's are checked against the schema by each stage's tests)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())
NO_DEFAULT = object()
WORDS = {"(required)": NO_DEFAULT, "first database": None, "all four": ["dist", "omega", "theta", "phi"]}
"""Defaults a table states in words."""


def schema_default(key: str):
    """The schema's default of a dotted key (``NAME`` stands for any database name)."""
    node = {"properties": SCHEMA["properties"]}
    for part in key.split("."):
        node = node["additionalProperties"] if part == "NAME" else node["properties"][part]
    return node.get("default", NO_DEFAULT if key.endswith(".fasta") or key == "proteomes.NAME" else None)


def stated(text: str):
    """A table's default cell as a value: YAML, without backticks and a closing note in parentheses."""
    text = text.strip()
    if text in WORDS:
        return WORDS[text]
    text = re.sub(r"\s*\(.*\)$", "", text).strip("`")
    return yaml.safe_load(text)


def table_rows(path: Path):
    """``(key, default cell)`` of every row of the page's ``| key | default | meaning |`` tables: a first cell of
    backticked keys (several separated by `` / `` or ``, ``, their defaults likewise, or one for all), prefixed by
    the section a heading names as ``(`section:`)``; a key written ``.key`` or without a dot after a dotted first
    key belongs to the first key's section."""
    section, in_table = None, False
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            match = re.search(r"\(`(\w+):`\)", line)
            section = match.group(1) if match else None
        if not line.startswith("|"):
            in_table = False
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[:2] == ["key", "default"]:
            in_table = True
            continue
        if not in_table or set(cells[0]) <= {"-"}:
            continue
        keys = re.findall(r"`([^`]+)`", cells[0])
        cell = re.sub(r"\s*\(.*\)$", "", cells[1]) if len(keys) > 1 else cells[1]
        defaults = cell.split(" / " if " / " in cell else ", ") if len(keys) > 1 else [cell]
        if len(defaults) == 1:
            defaults *= len(keys)                     # one default stated for all of them
        assert len(defaults) == len(keys), line
        first = None
        for key, default in zip(keys, defaults):
            if first is not None and "." in first and (key.startswith(".") or "." not in key):
                key = first.rsplit(".", 1)[0] + "." + key.lstrip(".")
            elif section is not None:
                key = f"{section}.{key}"
            first = first or key
            yield key, default


def schema_keys() -> set[str]:
    """Every key of the schema, dotted (``NAME`` for a proteome's or a database's name)."""
    keys = set()
    for section, node in SCHEMA["properties"].items():
        if "additionalProperties" in node and isinstance(node["additionalProperties"], dict):
            names = node["additionalProperties"].get("properties")
            keys |= {f"{section}.NAME.{key}" for key in names} if names else {f"{section}.NAME"}
        elif "properties" in node:
            keys |= {f"{section}.{key}" for key in node["properties"]}
        else:
            keys.add(section)
    return keys


@pytest.mark.parametrize("page", ["docs/configuration.md", "README.md"])
def test_configuration_tables_state_the_schema_defaults(page):
    rows = list(table_rows(ROOT / page))
    assert len(rows) >= 20
    for key, default in rows:
        assert stated(default) == schema_default(key), f"{page}: {key} is {default}"
    assert {key for key, _ in rows} <= schema_keys()


def test_the_configuration_page_lists_every_key():
    assert schema_keys() == {key for key, _ in table_rows(ROOT / "docs" / "configuration.md")}
