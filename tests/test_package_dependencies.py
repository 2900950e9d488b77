"""Package-level imports inside workflow_lib point one way between the network and the stages that use it."""

from __future__ import annotations

import re
from pathlib import Path

import workflow_lib

PACKAGES = ("model", "training", "inference", "evaluate", "features", "templates")
IMPORT = re.compile(r"^\s*(?:from|import)\s+workflow_lib\.(\w+)", re.MULTILINE)


def package_edges() -> dict[tuple[str, str], list[str]]:
    """``{(importer, imported): files}`` over the modules of workflow_lib (lazy imports inside functions too)."""
    root = Path(workflow_lib.__file__).parent
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if len(parts) < 2:
            continue
        for imported in IMPORT.findall(path.read_text(encoding="utf-8")):
            if imported != parts[0]:
                edges.setdefault((parts[0], imported), []).append("/".join(parts))
    return edges


def test_no_two_way_package_dependencies():
    edges = package_edges()
    two_way = sorted({tuple(sorted(pair)) for pair in edges if pair[::-1] in edges
                      and set(pair) <= set(PACKAGES)})
    assert not two_way, {pair: (edges[pair], edges[pair[::-1]]) for pair in two_way}


def test_the_network_imports_no_application_package():
    assert not [pair for pair in package_edges() if pair[0] == "model" and pair[1] in PACKAGES]
