"""Which notebook cell a frame of pickled-by-value code came from.

cloudpickle ships a notebook-defined class's code with ``co_filename`` replaced by
``<dynamic-code>`` but its line numbers and qualified names intact, so the kernel
finds the cell by looking for a function of that qualified name whose lines
include the frame's line, newest cell first.
"""

from __future__ import annotations

import ast
import linecache
from collections.abc import Iterable
from typing import Any

from .failures import Frame


def _functions(tree: ast.AST) -> Iterable[tuple[str, ast.AST]]:
    """(qualified name, node) of every function in ``tree``, as ``co_qualname`` spells it."""
    stack: list[tuple[str, ast.AST]] = [("", tree)]
    while stack:
        prefix, node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                yield name, child
                stack.append((name + ".<locals>.", child))
            elif isinstance(child, ast.ClassDef):
                stack.append((prefix + child.name + ".", child))
            elif isinstance(child, ast.Lambda):
                yield prefix + "<lambda>", child
            else:
                stack.append((prefix, child))


def find(cells: Iterable[tuple[int, str]], frame: Frame) -> tuple[int, str] | None:
    """(cell number, source line) of the newest cell in ``cells`` (number, source) defining
    ``frame``'s function around its line; None when none does."""
    wanted = frame.qualname or frame.name
    for number, source in sorted(cells, key=lambda c: -c[0]):
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        lines = source.splitlines()
        for qualname, node in _functions(tree):
            exact = qualname == wanted if frame.qualname else qualname.rsplit(".", 1)[-1] == wanted
            end = getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
            if exact and node.lineno <= frame.lineno <= end and frame.lineno <= len(lines):  # type: ignore[attr-defined]
                return number, lines[frame.lineno - 1]
    return None


def kernel_cells(shell: Any) -> list[tuple[int, str]]:
    """(execution count, compiled source) of the cells this IPython shell ran."""
    names = getattr(getattr(shell, "compile", None), "_filename_map", {}) or {}
    out = []
    for filename, number in names.items():
        entry = linecache.cache.get(filename)
        if entry and len(entry) == 4 and isinstance(number, int):  # (size, mtime, lines, name)
            out.append((number, "".join(entry[2])))
    return out
