"""Package-level imports inside workflow_lib point one way: no two packages import each other, the network imports
no application package, and the data contracts sit below every stage."""

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
    """Over every subpackage of workflow_lib (lazy imports inside functions included)."""
    edges = package_edges()
    two_way = sorted({tuple(sorted(pair)) for pair in edges if pair[::-1] in edges})
    assert not two_way, {pair: (edges[pair], edges[pair[::-1]]) for pair in two_way}


def test_the_data_contracts_import_no_stage():
    imported = {b for a, b in package_edges() if a == "schemas"}
    assert imported <= {"errors", "seqio", "structure"}, imported
    assert not [a for a, b in package_edges() if b == "workflow"]   # the glue is imported by no stage


def test_the_network_imports_no_application_package():
    assert not [pair for pair in package_edges() if pair[0] == "model" and pair[1] in PACKAGES]
