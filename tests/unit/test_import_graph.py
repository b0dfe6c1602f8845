"""No import cycle between the modules of monarch_jupyter, read from the source with ``ast``.

Every ``import`` counts wherever it is (module level or inside a function: a function-local import
that closes a cycle is still a cycle), except those under ``if TYPE_CHECKING:``, which never run.
An import names the module it loads: ``from pkg import mod`` is an edge to ``pkg.mod`` when that
is a module, to ``pkg`` (its ``__init__``) when the name is defined there. The parent packages
Python runs first are not edges: every module would otherwise sit in a cycle with
``monarch_jupyter/__init__.py``, whose ``load_ipython_extension`` imports the magics.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import monarch_jupyter

PACKAGE = Path(monarch_jupyter.__file__).resolve().parent
ROOT = "monarch_jupyter"

Edges = dict[str, dict[str, list[int]]]  # importer -> imported -> line numbers


def module_files() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if "labextension" in parts:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join((ROOT, *parts))] = path
    return modules


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}:
            for inner in node.body:
                skipped.update(id(n) for n in ast.walk(inner))
    return skipped


def _targets(node: ast.Import | ast.ImportFrom, name: str, is_package: bool, known: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join([*base, *([node.module] if node.module else [])])
    else:
        source = node.module or ""
    found = []
    for alias in node.names:
        child = f"{source}.{alias.name}"
        found.append(child if child in known else source)
    return found


@functools.cache
def import_graph() -> Edges:
    """Parsed once per session; callers must not change it."""
    files = module_files()
    known = set(files)
    edges: Edges = {name: {} for name in files}
    for name, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        skipped = _type_checking_only(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in skipped:
                continue
            for target in _targets(node, name, path.name == "__init__.py", known):
                while target and target not in known and target.startswith(ROOT + "."):
                    target = target.rpartition(".")[0]  # `import pkg.mod.attr` style: the module
                if target in known and target != name:
                    edges[name].setdefault(target, []).append(node.lineno)
    return edges


def cycles(edges: Edges) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def describe(component: list[str], edges: Edges) -> str:
    members = set(component)
    lines = [" <-> ".join(component)]
    for importer in component:
        for imported, at in sorted(edges[importer].items()):
            if imported in members:
                where = ", ".join(map(str, sorted(set(at))))
                lines.append(f"    {importer} imports {imported} (line {where})")
    return "\n".join(lines)


def test_the_graph_sees_the_package_and_its_function_level_imports():
    edges = import_graph()
    assert "monarch_jupyter.jobs.magic" in edges and "monarch_jupyter" in edges
    # load_ipython_extension imports the composition root, and it the magics, inside function bodies
    assert "monarch_jupyter.extension.load" in edges["monarch_jupyter"]
    assert "monarch_jupyter.jobs.magic" in edges["monarch_jupyter.extension.load"]


def test_a_cycle_is_found_and_named():
    edges: Edges = {"a": {"b": [1]}, "b": {"c": [2]}, "c": {"a": [3]}, "d": {"a": [4]}}
    assert cycles(edges) == [["a", "b", "c"]]
    assert "c imports a (line 3)" in describe(["a", "b", "c"], edges)


def test_no_import_cycles():
    edges = import_graph()
    found = cycles(edges)
    assert not found, "import cycles in monarch_jupyter:\n" + "\n".join(describe(c, edges) for c in found)
