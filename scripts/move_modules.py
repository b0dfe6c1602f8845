"""Move modules of the package and rewrite every reference to them, as one mechanical step.

    python scripts/move_modules.py remote.model=remote.view.model remote.verbs=remote.cell.verbs ...

Each pair names a module or a package below ``monarch_jupyter`` (old=new). The script

1. moves the files with ``git mv`` (creating the new packages' ``__init__.py`` when missing),
2. rewrites every ``import``/``from … import`` in the repo's Python files (the package, tests,
   benchmarks, scripts, docs): absolute ones to the new dotted name, relative ones re-expressed
   relative to the importing module's new place (so a moved module keeps its relative style),
   and ``from package import module`` split when its names now live in different packages,
3. rewrites dotted names (``monarch_jupyter.remote.model``) and paths
   (``monarch_jupyter/remote/model.py``, ``remote/model.py``) in every tracked text file:
   strings passed to ``mock.patch``, ``python -m``, docs, configs.

It changes no behaviour; what it cannot rewrite (an attribute path through a parent package)
the tests find. Run ``ruff check --fix`` (import order) and ``ruff format`` after it.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = "monarch_jupyter"
# history and data written by earlier code: never rewritten
KEEP = ("CHANGELOG.md", "tests/fixtures/")
TEXT_SUFFIXES = {
    ".py",
    ".md",
    ".toml",
    ".cfg",
    ".ini",
    ".txt",
    ".json",
    ".ts",
    ".ipynb",
    ".sh",
    ".rst",
    ".yml",
}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def module_path(dotted: str) -> tuple[Path, bool]:
    """The file (or package folder) of ``dotted`` and whether it is a package."""
    base = ROOT / Path(*dotted.split("."))
    if base.is_dir():
        return base, True
    return base.with_suffix(".py"), False


def module_of(path: Path) -> tuple[str, bool]:
    """The dotted name of a Python file and whether it is a package's ``__init__``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


class Mapper:
    def __init__(self, pairs: dict[str, str]) -> None:
        # longest first, so remote.verbs.runs maps before remote.verbs
        self.pairs = dict(sorted(pairs.items(), key=lambda kv: -len(kv[0])))

    def new(self, dotted: str) -> str:
        for old, new in self.pairs.items():
            if dotted == old or dotted.startswith(old + "."):
                return new + dotted[len(old) :]
        return dotted


def resolve(importer: str, is_pkg: bool, level: int, module: str | None) -> str:
    base = importer.split(".") if is_pkg else importer.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def relative(importer: str, is_pkg: bool, target: str) -> tuple[int, str]:
    """``target`` as (level, module) relative to ``importer``."""
    here = importer.split(".") if is_pkg else importer.split(".")[:-1]
    tparts = target.split(".")
    common = 0
    while common < min(len(here), len(tparts)) and here[common] == tparts[common]:
        common += 1
    level = len(here) - common + 1
    return level, ".".join(tparts[common:])


def all_modules() -> set[str]:
    return {module_of(p)[0] for p in (ROOT / PKG).rglob("*.py")}


def rewrite_imports(path: Path, mapper: Mapper, old_modules: set[str], moved_from: dict[Path, str]) -> bool:
    source = path.read_text()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    lines = source.splitlines(keepends=True)
    # where the file was (before the move), for resolving its relative imports
    in_pkg = path.is_relative_to(ROOT / PKG)
    importer_old = moved_from.get(path)
    if in_pkg:
        importer_new, is_pkg = module_of(path)
        importer_old = importer_old or importer_new
    else:
        importer_new, is_pkg = "", False
    edits: list[tuple[int, int, str]] = []  # (start line, end line, replacement)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            text = "".join(lines[node.lineno - 1 : node.end_lineno])
            new_text = text
            for alias in node.names:
                if alias.name.startswith(PKG + "."):
                    mapped = PKG + "." + mapper.new(alias.name[len(PKG) + 1 :])
                    new_text = re.sub(rf"\b{re.escape(alias.name)}\b", mapped, new_text)
            if new_text != text:
                edits.append((node.lineno, node.end_lineno or node.lineno, new_text))
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            if not in_pkg:
                continue
            target = resolve(importer_old, is_pkg, node.level, node.module)
        else:
            target = node.module or ""
            if not (target == PKG or target.startswith(PKG + ".")):
                continue
        rel_target = target[len(PKG) + 1 :] if target != PKG else ""
        # each imported name's new home: a submodule maps by itself, anything else with its module
        groups: dict[str, list[ast.alias]] = {}
        for alias in node.names:
            sub = f"{rel_target}.{alias.name}" if rel_target else alias.name
            if sub in old_modules:
                home = mapper.new(sub).rsplit(".", 1)[0] if "." in mapper.new(sub) else ""
                moved_name = mapper.new(sub).rsplit(".", 1)[-1]
                if moved_name != alias.name and alias.asname is None:
                    alias = ast.alias(name=moved_name, asname=alias.name)
                elif moved_name != alias.name:
                    alias = ast.alias(name=moved_name, asname=alias.asname)
            else:
                home = mapper.new(rel_target) if rel_target else ""
            groups.setdefault(home, []).append(alias)
        unchanged = list(groups) == [rel_target] and (not node.level or importer_old == importer_new)
        if unchanged and all(
            a.name == b.name and a.asname == b.asname
            for a, b in zip(groups[rel_target], node.names, strict=False)
        ):
            continue
        first = lines[node.lineno - 1]
        indent = first[: len(first) - len(first.lstrip())]
        text = "".join(lines[node.lineno - 1 : node.end_lineno])
        trailing = ""
        comment = re.search(r"(\s+#[^\n]*)\n?$", text.rstrip("\n") + "\n")
        if comment and node.end_lineno == node.lineno:
            trailing = comment.group(1)
        out = []
        for home, aliases in groups.items():
            full = PKG + ("." + home if home else "")
            if node.level:
                level, mod = relative(importer_new, is_pkg, full)
                spec = "." * level + mod
            else:
                spec = full
            names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in aliases)
            line = f"{indent}from {spec} import {names}"
            if len(line) > 100:
                inner = "".join(
                    f"{indent}    {a.name}{f' as {a.asname}' if a.asname else ''},\n" for a in aliases
                )
                line = f"{indent}from {spec} import (\n{inner}{indent})"
            out.append(line)
        edits.append((node.lineno, node.end_lineno or node.lineno, "\n".join(out) + trailing + "\n"))
    if not edits:
        return False
    for start, end, text in sorted(edits, reverse=True):
        lines[start - 1 : end] = [text]
    path.write_text("".join(lines))
    return True


def rewrite_text(path: Path, pairs: list[tuple[str, str]]) -> bool:
    try:
        text = path.read_text()
    except (UnicodeDecodeError, OSError):
        return False
    new = text
    for old, new_name in pairs:
        # dotted: monarch_jupyter.remote.model (not .models, not remote.model_x)
        new = re.sub(rf"(?<![\w.]){re.escape(PKG)}\.{re.escape(old)}(?![\w])", f"{PKG}.{new_name}", new)
        old_path, new_path = old.replace(".", "/"), new_name.replace(".", "/")
        # paths: [monarch_jupyter/]remote/model.py and package folders remote/verbs/
        new = re.sub(rf"(?<![\w/]){re.escape(PKG)}/{re.escape(old_path)}(?=\.py|/)", f"{PKG}/{new_path}", new)
        new = re.sub(rf"(?<![\w/.]){re.escape(old_path)}(?=\.py\b|/)", new_path, new)
    if new != text:
        path.write_text(new)
        return True
    return False


def main(argv: list[str]) -> int:
    pairs = dict(arg.split("=", 1) for arg in argv)
    mapper = Mapper(pairs)
    old_modules = {m[len(PKG) + 1 :] for m in all_modules() if m != PKG}
    moved_from: dict[Path, str] = {}
    for old, new in mapper.pairs.items():
        src, is_pkg = module_path(f"{PKG}.{old}")
        dst = ROOT / Path(PKG, *new.split("."))
        dst = dst if is_pkg else dst.with_suffix(".py")
        for parent in reversed(dst.relative_to(ROOT).parents):
            folder = ROOT / parent
            if folder != ROOT and not folder.exists():
                folder.mkdir()
            init = folder / "__init__.py"
            if folder.is_relative_to(ROOT / PKG) and not init.exists():
                init.write_text(f'"""{folder.relative_to(ROOT / PKG).as_posix().replace("/", ".")}."""\n')
                git("add", str(init))
        olds = [src] if not is_pkg else list(src.rglob("*.py"))
        git("mv", str(src), str(dst))
        for o in olds:
            n = dst if not is_pkg else dst / o.relative_to(src)
            moved_from[n] = f"{PKG}.{old}" + (
                "" if not is_pkg else "." + ".".join(o.relative_to(src).with_suffix("").parts)
            )
            if n.name == "__init__.py":
                moved_from[n] = moved_from[n].removesuffix(".__init__")
    files = [ROOT / f for f in git("ls-files").splitlines()]
    files += [ROOT / f for f in git("ls-files", "--others", "--exclude-standard").splitlines()]
    changed = 0
    for path in files:
        if path.relative_to(ROOT).as_posix().startswith(KEEP):
            continue
        if path.suffix == ".py" and path.exists() and path.resolve() != Path(__file__).resolve():
            changed += rewrite_imports(path, mapper, old_modules, moved_from)
    ordered = list(mapper.pairs.items())
    for path in files:
        relpath = path.relative_to(ROOT).as_posix()
        if relpath.startswith(KEEP):
            continue
        if path.suffix in TEXT_SUFFIXES and path.exists() and path.resolve() != Path(__file__).resolve():
            changed += rewrite_text(path, ordered)
    print(f"moved {len(pairs)} module(s); rewrote {changed} file edit(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
