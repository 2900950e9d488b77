"""Imports inside workflow_lib point one way: no two packages import each other, no module reaches itself through
a chain of imports (function-level imports included), the network imports no application package, and the data
contracts sit below every stage."""

from __future__ import annotations

import ast
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


def _module_name(root: Path, path: Path) -> str:
    parts = ("workflow_lib",) + path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_edges() -> dict[str, dict[str, int]]:
    """``{importer: {imported: line}}`` between the modules of workflow_lib.

    Every ``import`` statement counts, wherever it sits (module level, inside functions, under ``TYPE_CHECKING``):
    ``import workflow_lib.x.y``, ``from workflow_lib.x.y import z``, ``from workflow_lib.x import y`` where ``y``
    is a module (an edge to ``workflow_lib.x.y``, otherwise to the package ``workflow_lib.x``) and relative
    imports. A dotted name that is not a module resolves to the longest module prefix."""
    root = Path(workflow_lib.__file__).parent
    paths = {_module_name(root, path): path for path in sorted(root.rglob("*.py"))}
    modules = set(paths)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, dict[str, int]] = {}
    for importer, path in paths.items():
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        found = edges.setdefault(importer, {})
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                           for alias in node.names]
            for target in targets:
                if target.split(".")[0] != "workflow_lib":
                    continue
                imported = resolve(target)
                if imported and imported != importer:
                    found.setdefault(imported, node.lineno)
    return edges


def find_cycle(edges: dict[str, dict[str, int]]) -> list[str] | None:
    """One cycle of the graph as ``[a, b, ..., a]``, or None (depth-first search, three colours)."""
    state: dict[str, int] = {}   # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, {})):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_module_graph_finds_imports_and_cycles():
    edges = module_edges()
    assert "workflow_lib.aligner.profile" in edges["workflow_lib.aligner.scores"]   # from a.b.c import name
    assert "workflow_lib.aligner.compiled" in edges["workflow_lib.aligner.backtrace"]   # from a.b import module
    assert "workflow_lib.aligner" in edges["workflow_lib.search.iterative"]   # from a.b import name: the package
    assert "workflow_lib.evaluate.report" in edges["workflow_lib.evaluate.core"]   # an import inside a function
    assert find_cycle({"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": 1}, "b": {}}) is None


def test_no_import_cycle_between_modules():
    """Over every module of workflow_lib, imports inside functions included: no module reaches itself."""
    edges = module_edges()
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(
        [f"{a} (line {edges[a][b]})" for a, b in zip(cycle, cycle[1:])] + [cycle[-1]])
