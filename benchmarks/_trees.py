"""Source trees the benchmarks start kernels on, compiled to bytecode first.

A kernel imports monarch_jupyter from a source tree (``PYTHONPATH``); with no ``__pycache__``
beside it, and with ``PYTHONDONTWRITEBYTECODE`` set (as on this project's machines), every
import compiles from source and ``%load_ext`` measures the compiler, not the load a user
installing the wheel gets (pip writes the bytecode).
"""

from __future__ import annotations

import compileall
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def compiled(tree: str | Path = REPO) -> Path:
    """``tree`` (a folder holding ``monarch_jupyter/``), its package compiled; returns it."""
    root = Path(tree).resolve()
    if not compileall.compile_dir(root / "monarch_jupyter", quiet=1):
        raise SystemExit(f"{root}/monarch_jupyter does not compile")
    return root
