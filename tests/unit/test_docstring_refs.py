"""Every ``:mod:`` reference in the package's docstrings names a module that exists, so a move
(``scripts/move_modules.py``) that leaves a docstring behind fails here, not in a reader's head."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "monarch_jupyter"


def _name(path: Path) -> tuple[list[str], bool]:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    is_pkg = parts[-1] == "__init__"
    return (parts[:-1] if is_pkg else parts), is_pkg


MODULES = {".".join(_name(p)[0]) for p in PACKAGE.rglob("*.py")}


def resolves(parts: list[str], is_pkg: bool, ref: str) -> bool:
    """``ref`` as Sphinx finds it from module ``parts``: absolute, relative to the module's package
    (one dot more for each level up), or a name under one of the module's ancestors."""
    if not ref.startswith("."):
        return not ref.startswith("monarch_jupyter") or ref in MODULES
    level = len(ref) - len(ref.lstrip("."))
    rest = ref.lstrip(".")
    base = parts if is_pkg else parts[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    if ".".join(base + ([rest] if rest else [])) in MODULES:
        return True
    return any(".".join([*parts[:i], rest]) in MODULES for i in range(len(parts), 0, -1))


def test_every_mod_reference_resolves():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts, is_pkg = _name(path)
        for match in re.finditer(r":mod:`~?([.\w]+)`", path.read_text()):
            if not resolves(parts, is_pkg, match.group(1)):
                bad.append(f"{path.relative_to(PACKAGE.parent)}: :mod:`{match.group(1)}`")
    assert not bad, "\n".join(bad)


def test_the_check_fails_on_a_moved_module():
    assert resolves(["monarch_jupyter", "remote", "run", "drive"], False, "..view.model")
    assert not resolves(["monarch_jupyter", "remote", "run", "drive"], False, ".model_gone")
    assert not resolves(["monarch_jupyter", "x"], False, "monarch_jupyter.remote.model")
