"""Parse ``%%remote`` / ``%remote`` flags into a frozen :class:`RemoteArgs`.

Pure: no Monarch, no IPython, no threads. Every problem is a one-line
:class:`ArgsError` that the magic shows as a UsageError.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from ..errors import MonarchJupyterError

MODES = ("bash", "python")

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ArgsError(MonarchJupyterError):
    """A bad ``%%remote`` flag or value."""


@dataclass(frozen=True)
class RemoteArgs:
    """What one ``%%remote`` invocation asked for."""

    command: str
    mode: str = "bash"
    mesh: str | None = None
    all_meshes: bool = False
    point: tuple[tuple[str, int], ...] | None = None
    ranks: tuple[int, ...] | None = None
    per_host: tuple[tuple[str, int], ...] | None = None
    env: tuple[tuple[str, str], ...] = ()
    workdir: str | None = None
    output_dir: str | None = None
    timeout: float | None = None
    no_raise: bool = False
    save: str | None = None
    group: bool = False
    quiet: bool = False
    detach: bool = False

    @property
    def live(self) -> bool:
        """Whether lines are shown while the command runs."""
        return not (self.quiet or self.group)


# flag → (field, takes a value)
_FLAGS: dict[str, tuple[str, bool]] = {
    "--mesh": ("mesh", True),
    "--all": ("all_meshes", False),
    "--point": ("point", True),
    "--rank": ("ranks", True),
    "--per-host": ("per_host", True),
    "-e": ("env", True),
    "--env": ("env", True),
    "--workdir": ("workdir", True),
    "--output-dir": ("output_dir", True),
    "--timeout": ("timeout", True),
    "--no-raise": ("no_raise", False),
    "--save": ("save", True),
    "--group": ("group", False),
    "--quiet": ("quiet", False),
    "--detach": ("detach", False),
}


def parse_cell(line: str, cell: str) -> RemoteArgs:
    """``%%remote [flags] [bash|python] [flags]`` with the cell as the command."""
    words = _split(line)
    values: dict = {}
    mode = None
    i = 0
    while i < len(words):
        word = words[i]
        if word in MODES and mode is None:
            mode = word
            i += 1
            continue
        if not word.startswith("-"):
            raise ArgsError(f"unexpected {word!r}: the mode is bash or python, given once (see %%remote?)")
        i = _take_flag(words, i, values)
    if not cell.strip():
        raise ArgsError("the cell is empty: put the bash or Python code to run under %%remote")
    return _build(cell, mode or "bash", values)


def parse_line(line: str) -> RemoteArgs:
    """``%remote [flags] CMD…``: flags first; the rest of the line, verbatim, is bash."""
    values: dict = {}
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: list[str] = []
    starts: list[int] = []
    try:
        while True:
            start = lexer.instream.tell()
            token = lexer.get_token()
            if token is None or token == lexer.eof:
                break
            words.append(token)
            starts.append(start)
    except ValueError as error:
        raise ArgsError(f"cannot parse the line: {error}") from None
    i = 0
    command = ""
    while i < len(words):
        word = words[i]
        if word == "--":
            command = line[starts[i + 1]:].strip() if i + 1 < len(words) else ""
            break
        if word.startswith("-"):  # unknown flags are errors; `--` starts a command that begins with '-'
            i = _take_flag(words, i, values)
            continue
        command = line[starts[i]:].strip()
        break
    if not command:
        raise ArgsError("no command: %remote [flags] CMD… (or %%remote for a cell)")
    return _build(command, "bash", values)


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as error:
        raise ArgsError(f"cannot parse the flags: {error}") from None


def _flag_name(word: str) -> str:
    return word.split("=", 1)[0] if word.startswith("--") else word


def _take_flag(words: list[str], i: int, values: dict) -> int:
    word = words[i]
    name = _flag_name(word)
    if name not in _FLAGS:
        raise ArgsError(f"unknown flag {word!r} (see %%remote? for the flags)")
    key, takes_value = _FLAGS[name]
    inline = word[len(name) + 1:] if "=" in word and word.startswith("--") else None
    if not takes_value:
        if inline is not None:
            raise ArgsError(f"{name} takes no value")
        values[key] = True
        return i + 1
    if inline is not None:
        value, nxt = inline, i + 1
    else:
        if i + 1 >= len(words):
            raise ArgsError(f"{name} needs a value")
        value, nxt = words[i + 1], i + 2
    if key == "env":
        values.setdefault("env", []).append(value)
    else:
        if key in values:
            raise ArgsError(f"{name} given twice")
        values[key] = value
    return nxt


def _dims(text: str, flag: str, minimum: int) -> tuple[tuple[str, int], ...]:
    pairs = []
    seen = set()
    for part in text.split(","):
        name, sep, number = part.strip().partition("=")
        name = name.strip()
        if not sep or not _IDENT.match(name):
            raise ArgsError(f"{flag} wants DIM=N[,DIM=N…], got {text!r}")
        try:
            value = int(number)
        except ValueError:
            raise ArgsError(f"{flag}: {number.strip()!r} is not an integer") from None
        if value < minimum:
            raise ArgsError(f"{flag}: {name}={value} must be ≥ {minimum}")
        if name in seen:
            raise ArgsError(f"{flag}: {name} given twice")
        seen.add(name)
        pairs.append((name, value))
    return tuple(pairs)


def _build(command: str, mode: str, values: dict) -> RemoteArgs:
    kw: dict = {"command": command, "mode": mode}
    for key in ("all_meshes", "no_raise", "group", "quiet", "detach"):
        kw[key] = bool(values.get(key, False))
    if "mesh" in values:
        kw["mesh"] = values["mesh"]
    if kw["all_meshes"] and kw.get("mesh"):
        raise ArgsError("--all and --mesh exclude each other")
    if "point" in values and "ranks" in values:
        raise ArgsError("--point and --rank exclude each other")
    if "point" in values:
        kw["point"] = _dims(values["point"], "--point", 0)
    if "ranks" in values:
        ranks = []
        for part in values["ranks"].split(","):
            try:
                rank = int(part)
            except ValueError:
                raise ArgsError(f"--rank wants N[,M…], got {values['ranks']!r}") from None
            if rank < 0:
                raise ArgsError(f"--rank: {rank} is negative")
            if rank not in ranks:
                ranks.append(rank)
        kw["ranks"] = tuple(ranks)
    if "per_host" in values:
        kw["per_host"] = _dims(values["per_host"], "--per-host", 1)
    env = []
    for item in values.get("env", []):
        key, sep, value = item.partition("=")
        if not sep or not _ENV_KEY.match(key):
            raise ArgsError(f"-e/--env wants KEY=VALUE, got {item!r}")
        env.append((key, value))
    kw["env"] = tuple(env)
    for key in ("workdir", "output_dir"):
        if key in values:
            if not values[key]:
                raise ArgsError(f"--{key.replace('_', '-')} needs a directory")
            kw[key] = values[key]
    if "timeout" in values:
        try:
            timeout = float(values["timeout"])
        except ValueError:
            raise ArgsError(f"--timeout wants seconds, got {values['timeout']!r}") from None
        if not timeout > 0:
            raise ArgsError("--timeout must be > 0 seconds")
        kw["timeout"] = timeout
    if "save" in values:
        if not _IDENT.match(values["save"]):
            raise ArgsError(f"--save wants a Python variable name, got {values['save']!r}")
        kw["save"] = values["save"]
    if kw["detach"]:
        for key, flag in (("timeout", "--timeout"), ("save", "--save")):
            if key in kw:
                raise ArgsError(f"--detach and {flag} exclude each other: a detached run has no cell waiting for it")
    return RemoteArgs(**kw)
