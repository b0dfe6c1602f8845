"""Tab completion for ``%job``, ``%%remote`` and ``%remote``: verbs, flags, context names,
mesh names and dims, run ids and ``module.attr`` specs of the notebook's folder.

:func:`complete` is pure: the text of the line up to the cursor and plain :class:`Facts` in,
the fragment to replace and its candidates out. :func:`folder_facts` reads the facts from
the folder (file reads only, bounded: completion never attaches to a job or imports a
module), and :func:`install` hooks both into IPython's completer (a ``context_matcher``).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ..jobs import args as job_args
from ..text.parser import MagicParser

#: The dimension every host mesh has; ``--per-host`` adds the ones a line names.
HOST_DIM = "hosts"
#: Largest module file whose top-level names are offered after ``module.``.
MODULE_BYTES = 256 << 10
#: Most ``.py`` files of the folder looked at.
MODULE_FILES = 500
_SPEC_FLAGS = ("--local", "--ssh", "--python", "--port", "--config")
_LOCAL_FLAGS = ("--telemetry", "--admin", "--mount", "--gather")  # a --local job's flags (job_args)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Facts:
    """What the candidates come from. ``attrs(module)`` gives the names a ``module.attr`` spec
    may end with."""

    contexts: Sequence[str] = ()
    meshes: Sequence[str] = ()
    runs: Sequence[str] = ()  # newest first
    modules: Sequence[str] = ()
    attrs: Callable[[str], Sequence[str]] = field(default=lambda module: ())
    remote_verbs: Mapping[str, MagicParser] = field(default_factory=dict)
    cell_parser: MagicParser | None = None  # %%remote's flags
    line_parser: MagicParser | None = None  # %remote's flags


class Completions(NamedTuple):
    """Replace ``fragment`` (the end of the text before the cursor) by one of ``candidates``."""

    fragment: str
    candidates: list[str]


NOTHING = Completions("", [])


def complete(before: str, facts: Facts, first_line: bool = True) -> Completions:
    """Candidates for the line ``before`` (the current line up to the cursor). ``first_line``:
    whether it is the cell's first line (the only place ``%%remote`` flags go)."""
    stripped = before.lstrip()
    head, _, rest = stripped.partition(" ")
    if not _:
        return NOTHING  # still typing the magic's name: IPython's own matcher offers it
    words = rest.split()
    fragment = "" if rest.endswith((" ", "\t")) or not rest else words.pop()
    if head == "%job":
        return _job(words, fragment, facts)
    if head == "%%remote" and first_line and facts.cell_parser is not None:
        return _remote_flags(words, fragment, facts, facts.cell_parser, ("bash", "python"))
    if head == "%remote" and facts.line_parser is not None:
        return _remote_line(words, fragment, facts)
    return NOTHING


def _matching(fragment: str, names: Sequence[str]) -> Completions:
    return Completions(fragment, [n for n in dict.fromkeys(names) if n.startswith(fragment)])


def _job(words: list[str], fragment: str, facts: Facts) -> Completions:
    if not words:
        return _matching(fragment, job_args.VERBS)
    verb = words[0]
    if verb == "context":
        if len(words) == 1:
            return _matching(fragment, job_args.CONTEXT_ACTIONS)
        if len(words) == 2 and words[1] in ("use", "rm"):
            return _matching(fragment, facts.contexts)
        return NOTHING
    if verb in ("status", "kill") and len(words) == 1:
        return _matching(fragment, facts.contexts)
    if verb == "debug" and len(words) == 1:
        return _matching(fragment, ("on", "off"))
    if verb == "logs" and fragment.startswith("-"):
        return _matching(fragment, ("--follow",))
    if verb == "apply":
        return _spec(words[1:], fragment, facts)
    return NOTHING


def _spec(words: list[str], fragment: str, facts: Facts) -> Completions:
    if fragment.startswith("-"):
        if "--local" in words:
            return _matching(fragment, _LOCAL_FLAGS)
        return _matching(fragment, _SPEC_FLAGS if "--ssh" in words else _SPEC_FLAGS[:2])
    if words:
        return NOTHING  # a mesh list or a flag's value
    module, dot, _attr = fragment.rpartition(".")
    if dot:
        names = [f"{module}.{name}" for name in facts.attrs(module)]
        return _matching(fragment, names)
    return _matching(fragment, [f"{m}." for m in facts.modules])


def _remote_line(words: list[str], fragment: str, facts: Facts) -> Completions:
    verbs = facts.remote_verbs
    if not words and not fragment.startswith("-"):
        return _matching(fragment, list(verbs))
    if words and words[0] in verbs:
        return _verb(verbs[words[0]], words[1:], fragment, facts)
    assert facts.line_parser is not None
    if any(not w.startswith("-") and not _takes_value(facts.line_parser, p) for w, p in _pairs(words)):
        return NOTHING  # the command has begun: what follows is bash
    return _remote_flags(words, fragment, facts, facts.line_parser, ())


def _pairs(words: list[str]) -> list[tuple[str, str]]:
    """Each word with the word before it ("" for the first)."""
    return list(zip(words, ["", *words], strict=False))


def _takes_value(parser: MagicParser, flag: str) -> bool:
    return any(flag in strings and value for strings, value, _ in parser.options())


def _dest(parser: MagicParser, flag: str) -> str | None:
    return next((dest for strings, value, dest in parser.options() if flag in strings and value), None)


def _remote_flags(
    words: list[str], fragment: str, facts: Facts, parser: MagicParser, modes: Sequence[str]
) -> Completions:
    dest = _dest(parser, words[-1]) if words else None
    if dest is not None:
        return _value(dest, words, fragment, facts)
    if fragment.startswith("-"):
        given = set(words)
        flags = [s for strings, _, _ in parser.options() if not given & set(strings) for s in strings]
        return _matching(fragment, [f for f in flags if f.startswith("--")] or flags)
    if modes and not any(w in modes for w in words):
        return _matching(fragment, modes)
    return NOTHING


def _value(dest: str, words: list[str], fragment: str, facts: Facts) -> Completions:
    if dest == "mesh":
        return _matching(fragment, facts.meshes)
    if dest in ("point", "per_host"):
        done, _, last = fragment.rpartition(",")
        prefix = f"{done}," if done else ""
        named = {p.split("=")[0] for p in done.split(",") if p}
        dims = [d for d in (HOST_DIM, *_per_host_dims(words)) if d not in named]
        if dest == "per_host":
            dims = [d for d in dims if d != HOST_DIM] or ["gpus"]
        return Completions(fragment, [f"{prefix}{d}=" for d in dict.fromkeys(dims) if d.startswith(last)])
    return NOTHING


def _per_host_dims(words: list[str]) -> list[str]:
    """The dims a ``--per-host`` of the line names (``--per-host gpus=2`` → gpus)."""
    return [
        part.split("=")[0]
        for word, before in _pairs(words)
        if before == "--per-host"
        for part in word.split(",")
        if "=" in part
    ]


def _verb(parser: MagicParser, words: list[str], fragment: str, facts: Facts) -> Completions:
    dest = _dest(parser, words[-1]) if words else None
    if dest is not None:
        return _value(dest, words, fragment, facts)
    if fragment.startswith("-"):
        return _matching(
            fragment, [s for strings, _, _ in parser.options() for s in strings if s.startswith("--")]
        )
    if {"run", "runs"} & set(parser.positionals()):
        return _matching(fragment, [r for r in facts.runs if r not in words])
    return NOTHING


# ── the facts of a folder ──────────────────────────────────────────────
def modules(root: Path) -> list[str]:
    """The importable modules of ``root``: ``*.py`` files and packages, sorted."""
    names: list[str] = []
    try:
        with os.scandir(root) as entries:
            for index, entry in enumerate(entries):
                if index >= MODULE_FILES:
                    break
                stem = entry.name.removesuffix(".py")
                if not _IDENT.match(stem) or entry.name.startswith("_"):
                    continue
                if entry.name.endswith(".py") and entry.is_file(follow_symlinks=False):
                    names.append(stem)
                elif entry.is_dir(follow_symlinks=False) and os.path.isfile(Path(entry.path, "__init__.py")):
                    names.append(entry.name)
    except OSError:
        return []
    return sorted(names)


def top_level_names(root: Path, module: str) -> list[str]:
    """The public names a module of ``root`` defines at its top level, read by parsing its
    source (never importing it); [] when it is missing, large or does not parse."""
    from ..system.files import read_small

    parts = module.split(".")
    if not all(_IDENT.match(p) for p in parts):
        return []
    base = root.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        data = read_small(path, MODULE_BYTES) if path.is_file() else None
        if data is not None:
            try:
                tree = ast.parse(data)
            except (SyntaxError, ValueError):
                return []
            return sorted(n for n in _defined(tree) if not n.startswith("_"))
    return []


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def folder_facts(session: Any, line: str = "") -> Facts:
    """The facts of ``session``'s folder and context: context names, the meshes of its
    ``status.json``, its run ids (running first), the folder's modules, the parsers. Given the
    ``line``, only what its magic can use is read (no runs index for ``%job``, no folder scan
    for ``%remote``)."""
    from ..remote.view import args as remote_args

    layout, context = session.layout, session.layout.current()
    status = layout.read_status(context) or {}
    meshes = [m.get("name") for m in status.get("meshes") or () if isinstance(m, dict)]
    from ..remote.run import index

    job_line = line.lstrip().startswith("%job")
    entries = [] if job_line else index.load_entries(layout.dir / context / "runs")
    runs = [e.id for e in entries if e.is_running] + [e.id for e in entries if not e.is_running]
    root = Path(session.root)
    return Facts(
        contexts=layout.names(),
        meshes=[m for m in meshes if isinstance(m, str)],
        runs=runs,
        modules=modules(root) if job_line or not line else [],
        attrs=lambda module: top_level_names(root, module),
        remote_verbs=remote_args.VERBS,
        cell_parser=remote_args.PARSERS[remote_args.CELL],
        line_parser=remote_args.PARSERS[remote_args.LINE],
    )


def install(ipython: Any, session: Any) -> None:
    """Add the matcher to ``ipython``'s completer (once)."""
    completer = getattr(ipython, "Completer", None)
    if completer is None or any(_ours(m) for m in completer.custom_matchers):
        return
    from IPython.core.completer import CompletionContext, SimpleCompletion, context_matcher

    @context_matcher()
    def monarch_matcher(context: CompletionContext) -> dict[str, Any]:
        before = context.text_until_cursor
        if not before.lstrip().startswith(("%job", "%%remote", "%remote")):
            return {"completions": [], "suppress": False}
        first_line = context.cursor_line == 0
        try:
            found = complete(before, folder_facts(session, before), first_line)
        except Exception:  # completion must never raise into the front end
            found = NOTHING
        return {
            "completions": [SimpleCompletion(text=c, type="monarch") for c in found.candidates],
            "matched_fragment": found.fragment,
            "suppress": bool(found.candidates),
        }

    completer.custom_matchers.append(monarch_matcher)


def _ours(matcher: object) -> bool:
    return getattr(matcher, "__module__", None) == __name__
