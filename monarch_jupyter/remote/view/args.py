"""Parse ``%%remote`` / ``%remote`` into a frozen :class:`RemoteArgs`.

The flags are defined once, in :func:`_add_flags` (argparse); the same
definitions parse both forms and write the flags part of ``%%remote?``
(:func:`help_text`). The command is never re-quoted: the cell body, or for
``%remote`` the rest of the line after the flags, exactly as typed.

A new flag is one ``add_argument`` line in :func:`_add_flags` (its ``dest`` is a
:class:`RemoteArgs` field). A ``%remote VERB …`` form is a parser in :data:`VERBS`
(made by :func:`add_verb`, which ``remote/cell/verbs.py`` calls beside each verb's handler):
the line is dispatched on its first word before the command form is parsed.

Pure: no Monarch, no IPython, no threads. A bad line is one
:class:`~..magic_parser.ArgumentsError`; ``-h``/``--help`` is a
:class:`~..magic_parser.HelpRequested`.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import io
import keyword
import math
import os
import re
import shlex
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...jobs.specs.local import MAX_LOCAL_WORKERS
from ...text.parser import ArgumentsError, LazyParsers, MagicParser
from ..errors import RemoteError

MODES = ("bash", "python")
CELL, LINE = "%%remote", "%remote"
HINT = "see %%remote?"
DEFAULT_SESSION = "main"
_ONE_MODE = "the mode is bash or python, given once"


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
    quiet_after: float | None = None
    no_raise: bool = False
    save: str | None = None
    group: bool = False
    diff: bool = False
    quiet: bool = False
    detach: bool = False
    torch: bool = False
    session: str | None = None  # --session NAME: run in each rank's namespace of that session
    cell_line: int = 2  # the notebook's line number of the cell body's first line (after %%remote)

    @property
    def live(self) -> bool:
        """Whether lines are shown while the command runs."""
        return not self.quiet


@dataclass(frozen=True)
class RemoteVerb:
    """A ``%remote VERB …`` line: the verb and its parsed options (see :data:`VERBS`)."""

    verb: str
    options: dict[str, Any]


#: ``%remote VERB …`` forms, tried on the line's first word before the command form:
#: verb → a :class:`MagicParser` whose options :func:`parse_line` returns as a
#: :class:`RemoteVerb`. ``%remote -- VERB`` runs a bash command named VERB. Filled by
#: :func:`add_verb` (``remote/cell/verbs/registry.py`` declares each verb's parser with its handler);
#: each parser is built when its verb is first used.
VERBS = LazyParsers()
#: verb → the option that takes the rest of its line verbatim, after its flags (``%remote pull EXPR``:
#: a Python expression keeps its quotes and spaces, as a ``%remote CMD`` keeps its command)
VERBATIM: dict[str, str] = {}


# ── value checks: text → value, or ArgumentTypeError (argparse names the flag) ──
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def dims(minimum: int) -> Callable[[str], tuple[tuple[str, int], ...]]:
    def parse(text: str) -> tuple[tuple[str, int], ...]:
        pairs: dict[str, int] = {}
        for part in text.split(","):
            name, sep, number = (s.strip() for s in part.partition("="))
            if not sep or not _IDENT.match(name):
                raise argparse.ArgumentTypeError(f"wants DIM=N[,DIM=N…], got {text!r}")
            try:
                value = int(number) if number.isascii() else int("x")
            except ValueError:
                raise argparse.ArgumentTypeError(f"{number!r} is not an integer (in {text!r})") from None
            if value < minimum:
                raise argparse.ArgumentTypeError(f"{name}={value} must be ≥ {minimum}")
            if name in pairs:
                raise argparse.ArgumentTypeError(f"{name} given twice (in {text!r})")
            pairs[name] = value
        return tuple(pairs.items())

    return parse


#: Procs one run may start (hosts × the product of the --per-host sizes, all meshes together):
#: the bound of ``--local``, since every proc is a process with its actor on a host.
MAX_PROCS = MAX_LOCAL_WORKERS
MAX_PROCS_VAR = "MONARCH_JUPYTER_MAX_PROCS"


def max_procs() -> int:
    """The bound: ``$MONARCH_JUPYTER_MAX_PROCS`` if set to a positive number, else :data:`MAX_PROCS`."""
    value = os.environ.get(MAX_PROCS_VAR, "").strip()
    return int(value) if value.isascii() and value.isdigit() and int(value) > 0 else MAX_PROCS


def _raise_it(total: int) -> str:
    return f"more than the bound of {max_procs()} procs a run; to raise it deliberately: %env {MAX_PROCS_VAR}={total}"


def _per_host(text: str) -> tuple[tuple[str, int], ...]:
    pairs = dims(1)(text)
    each = math.prod(v for _, v in pairs)
    if each > max_procs():
        raise argparse.ArgumentTypeError(f"{text} is {each} procs on each host, {_raise_it(each)}")
    return pairs


def check_procs(hosts: Mapping[str, int | None], per_host: tuple[tuple[str, int], ...]) -> None:
    """Raise RemoteError when ``--per-host`` on meshes of ``hosts`` (name → host count, None:
    unknown, counted as one) would start more procs than :func:`max_procs`."""
    count = sum(n or 1 for n in hosts.values())
    total = count * math.prod(v for _, v in per_host)
    if total > max_procs():
        shape = ",".join(f"{k}={v}" for k, v in per_host)
        raise RemoteError(
            f"--per-host {shape} on {count} hosts would start {total} procs, {_raise_it(total)}"
        )


def flat_ranks(text: str) -> tuple[int, ...]:
    ranks: dict[int, None] = {}
    for part in text.split(","):
        try:
            rank = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"wants N[,M…] (flat ranks), got {text!r}") from None
        if rank < 0:
            raise argparse.ArgumentTypeError(f"{rank} is negative; ranks count from 0")
        ranks[rank] = None
    return tuple(ranks)


RESERVED_ENV = ("MONARCH_JUPYTER_", "MONARCH_RANK_", "MONARCH_SIZE_")  # what each run's processes get from us


def _env(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not _IDENT.match(key):
        raise argparse.ArgumentTypeError(f"wants KEY=VALUE with KEY a variable name, got {text!r}")
    if key.startswith(RESERVED_ENV):
        raise argparse.ArgumentTypeError(
            f"{key} is set by monarch_jupyter for every run ({', '.join(p + '*' for p in RESERVED_ENV)} are reserved): use another name"
        )
    return key, value


def _directory(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("needs a directory, got ''")
    return text


def _seconds(text: str) -> float:
    try:
        seconds = float(text) if text.isascii() else float("x")
    except ValueError:
        raise argparse.ArgumentTypeError(f"wants seconds, got {text!r}") from None
    if not math.isfinite(seconds):
        raise argparse.ArgumentTypeError(f"wants a finite number of seconds, got {text!r}")
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text!r}")
    return seconds


#: Names IPython keeps in the user namespace: overwriting one breaks every later magic or its history.
IPYTHON_NAMES = frozenset(
    {"get_ipython", "In", "Out", "exit", "quit", "_", "__", "___", "_i", "_ii", "_iii", "_oh", "_dh", "_ih"}
)
_IPYTHON_HISTORY = re.compile(r"_i?[0-9]+", re.ASCII)


def _variable(text: str) -> str:
    if not _IDENT.fullmatch(text):
        raise argparse.ArgumentTypeError(f"wants a Python variable name, got {text!r}")
    if keyword.iskeyword(text):
        raise argparse.ArgumentTypeError(f"wants a Python variable name, got {text!r} (a keyword)")
    if text in IPYTHON_NAMES or _IPYTHON_HISTORY.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text} belongs to IPython (its history and helpers); choose another name"
        )
    return text


class _Once(argparse.Action):
    """Store a value, refusing a second one (which of the two was meant?)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if getattr(namespace, self.dest) is not None:
            raise argparse.ArgumentError(self, "given twice; give it once")
        setattr(namespace, self.dest, values)


def _add_flags(parser: MagicParser) -> None:
    """Every ``%%remote`` flag: one line each, grouped as ``%%remote?`` shows them."""
    # fmt: off
    targets = parser.add_argument_group("targets (as `monarch exec`)")
    meshes, ranks = targets.add_mutually_exclusive_group(), targets.add_mutually_exclusive_group()
    meshes.add_argument("--mesh", action=_Once, metavar="NAME", help="run on this host mesh (default: the job's first mesh)")
    meshes.add_argument("--all", dest="all_meshes", action="store_true", help="run on every mesh of the job")
    ranks.add_argument("--point", action=_Once, type=dims(0), metavar="DIM=N,…", help="only the ranks at this point (e.g. --point hosts=1)")
    ranks.add_argument("--rank", dest="ranks", action=_Once, type=flat_ranks, metavar="N[,M…]", help="only these flat ranks")
    targets.add_argument("--per-host", action=_Once, type=_per_host, metavar="DIM=N", help="N processes per host (e.g. --per-host gpu=4); every process gets MONARCH_RANK_<DIM> / MONARCH_SIZE_<DIM> for every dimension")

    environment = parser.add_argument_group("environment")
    environment.add_argument("-e", "--env", action="append", type=_env, metavar="KEY=VALUE", help="set a variable (repeatable)")
    environment.add_argument("--torch", action="store_true", help="also set torch.distributed's RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, as Monarch's SPMDActor (the last dim is the local one: --per-host gpus=N)")
    environment.add_argument("--workdir", action=_Once, type=_directory, metavar="DIR", help="run there ($SUBDIR: the rank's coordinates, as a --mount's folder per host; default: the notebook's folder when it exists on the worker, else the worker's)")
    environment.add_argument("--output-dir", action=_Once, type=_directory, metavar="DIR", help="also write each rank's stdout.txt / stderr.txt under DIR ($SUBDIR becomes the rank's coordinates, e.g. hosts_1_gpu_0)")

    control = parser.add_argument_group("control")
    control.add_argument("--timeout", action=_Once, type=_seconds, metavar="SECONDS", help="stop every rank after SECONDS (reported as timed out)")
    control.add_argument("--quiet-after", action=_Once, type=_seconds, metavar="SECONDS", help="flag a rank that printed nothing for SECONDS while it runs (default: 10× the others' silence, at least 10 s)")
    control.add_argument("--no-raise", action="store_true", help="do not raise when a rank fails (rc != 0)")
    control.add_argument("--save", action=_Once, type=_variable, metavar="NAME", help="store per-rank results (returncode, stdout, stderr, duration, status) in notebook variable NAME")

    output = parser.add_argument_group("output")
    output.add_argument("--group", action="store_true", help="print identical outputs once with the ranks that produced them, live (a rank is unfolded when it diverges) and at the end (as clush -b)")
    output.add_argument("--diff", action="store_true", help="after the run, each outlier rank's output as a diff against the most common output")
    output.add_argument("--quiet", action="store_true", help="no live lines, summary only")
    output.add_argument("--detach", action="store_true", help="return at once with the run id; the run goes on (%%remote attach RUN follows it, %%remote stop RUN ends it)")
    session = parser.add_argument_group("session (Python kept between cells)")
    session.add_argument("--session", nargs="?", const=DEFAULT_SESSION, action=_Once, metavar="NAME", help=f"run the Python cell in each rank's namespace of session NAME (default {DEFAULT_SESSION}), started by its first cell and kept between cells: variables, imports, a process group, a model (%%remote session ls|stop|restart, pull, push)")
    session.add_argument("--cell-line", type=int, default=2, help=argparse.SUPPRESS)  # %autoremote's cells start at line 1
    # fmt: on


#: The two forms, as the first lines of ``%%remote?``.
FORMS = (
    (f"{CELL} [bash|python] [flags]", "the cell is bash (default) or Python, run on each rank"),
    (f"{LINE} [flags] CMD…", "one bash line: all after the flags, as typed"),
)


def _parser(prog: str) -> MagicParser:
    usage = "\n".join(f"{form:<32} {summary}" for form, summary in FORMS)
    parser = MagicParser(
        prog, hint=HINT, help_text=help_text, usage=argparse.SUPPRESS, description=usage, add_help=False
    )
    parser.add_argument("-h", "--help", action="help", help=argparse.SUPPRESS)
    _add_flags(parser)
    if prog == CELL:
        parser.add_argument("mode", nargs="?", metavar="bash|python", help=argparse.SUPPRESS)
    else:
        parser.add_argument("command", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def help_text() -> str:
    """The forms and flags part of ``%%remote?``, from the definitions that parse."""
    text = PARSERS[CELL].format_help().rstrip()
    if VERBS:
        verbs = (_verb_line(parser.synopsis, parser.description or "") for parser in VERBS.values())
        text += "\n\nverbs (the first word of %remote; `%remote -- VERB` runs a command VERB):\n" + "\n".join(
            verbs
        )
    return text


def _wrap_groups(synopsis: str, most: int) -> list[str]:
    """``synopsis`` in lines of at most ``most`` columns, cut between its ``[...]`` groups only."""
    groups, depth, current = [], 0, ""
    for char in synopsis:
        if char == " " and depth == 0:
            groups.append(current)
            current = ""
            continue
        depth += (char == "[") - (char == "]")
        current += char
    groups.append(current)
    lines = [groups[0]]
    for group in groups[1:]:
        if len(lines[-1]) + 1 + len(group) > most:
            lines.append("    " + group)
        else:
            lines[-1] += " " + group
    return lines


def _verb_line(synopsis: str, description: str, width: int = 30, most: int = 88) -> str:
    """A verb's synopsis and description on one line, or below it when the synopsis is long
    (each wrapped to ``most`` columns)."""
    if len(synopsis) <= width and len(description) <= most - width - 3:
        return f"  {synopsis:<{width}} {description}".rstrip()
    words = _wrap_groups(synopsis, most - 2)
    indent = " " * (width + 3)
    text = textwrap.wrap(description, most, initial_indent=indent, subsequent_indent=indent)
    return "\n".join([*(f"  {line}" for line in words), *text]).rstrip()


#: the two forms' parsers, built on first use
PARSERS = LazyParsers()
PARSERS.declare(CELL, functools.partial(_parser, CELL))
PARSERS.declare(LINE, functools.partial(_parser, LINE))


def add_verb(
    name: str,
    description: str,
    arguments: Sequence[tuple[tuple[str, ...], dict[str, Any]]] = (),
    verbatim: str | None = None,
) -> None:
    """A new ``%remote name …`` form in :data:`VERBS`: its parser, with ``arguments`` (each
    ``(flags, options)`` of ``add_argument``), is built when the verb is first used. With
    ``verbatim``, every flag takes a value and comes first; the rest of the line, as typed, is
    that option (:data:`VERBATIM`)."""
    if name in VERBS:
        raise ValueError(f"%remote {name} is defined twice")
    if verbatim:
        VERBATIM[name] = verbatim

    def build() -> MagicParser:
        parser = MagicParser(f"{LINE} {name}", hint=HINT, description=description, add_help=False)
        parser.add_argument("-h", "--help", action="help", help=argparse.SUPPRESS)
        for flags, options in arguments:
            parser.add_argument(*flags, **options)
        return parser

    VERBS.declare(name, build)


def parse_cell(line: str, cell: str) -> RemoteArgs:
    """``%%remote [flags] [bash|python] [flags]`` with the cell as the command."""
    args = _cell_flags(line)
    if not cell.strip():
        raise ArgumentsError(f"{CELL}: the cell is empty; put the bash or Python code to run below {CELL}")
    return dataclasses.replace(args, command=cell)


@functools.lru_cache(maxsize=128)
def _cell_flags(line: str) -> RemoteArgs:
    """The flags of a ``%%remote`` line (no command yet), parsed once per distinct line: a
    notebook runs the same few lines again and again, and argparse is not free."""
    try:
        words = shlex.split(line)
    except ValueError as error:
        raise ArgumentsError(f"{CELL}: {error} in {line.strip()!r}") from None
    options = _parse(PARSERS[CELL], words, unexpected=_ONE_MODE)
    if (
        options.get("session") in MODES and options["mode"] is None
    ):  # `--session python`: the mode, not a name
        options["mode"], options["session"] = options["session"], DEFAULT_SESSION
    mode = options.pop("mode") or ("python" if options.get("session") else "bash")
    if mode not in MODES:  # checked here, not by argparse, so that `--bogus 1` is reported as --bogus
        PARSERS[CELL].error(f"unexpected {mode!r}; {_ONE_MODE}")
    return _checked(PARSERS[CELL], RemoteArgs(command="", mode=mode, **options))


def parse_line(line: str) -> RemoteArgs | RemoteVerb:
    """``%remote [flags] CMD…``: flags first; the rest of the line, verbatim, is bash.
    A first word in :data:`VERBS` makes it that verb's line instead."""
    words, starts = _words(line)
    if words and words[0] in VERBATIM:
        return _verbatim(line, words, starts)
    if words and words[0] in VERBS:
        return RemoteVerb(words[0], _parse(VERBS[words[0]], words[1:]))
    options = _parse(PARSERS[LINE], words)
    first = len(words) - len(options.pop("command"))
    if first < len(words) and words[first] == "--":  # `--` ends the flags; the command may start with '-'
        first += 1
    command = line[starts[first] :].strip() if first < len(words) else ""
    if not command:
        raise ArgumentsError(
            f"{LINE}: no command; put one after the flags: {FORMS[1][0]} (or use {CELL} for a cell)"
        )
    return _checked(PARSERS[LINE], RemoteArgs(command=command, **options))


def _verbatim(line: str, words: list[str], starts: list[int]) -> RemoteVerb:
    """A :data:`VERBATIM` verb's line: its flags (each with a value), then the rest as typed."""
    name = words[0]
    end = 1
    while end < len(words) and words[end].startswith("-") and words[end] not in ("-", "--"):
        end += 1 if "=" in words[end] or words[end] in ("-h", "--help") else 2
    if end < len(words) and words[end] == "--":
        end += 1
    rest = line[starts[end] :].strip() if end < len(words) else ""
    options = _parse(VERBS[name], words[1:end])
    if not rest:
        VERBS[name].error(f"what to evaluate goes after the flags: {VERBS[name].synopsis}")
    options[VERBATIM[name]] = rest
    return RemoteVerb(name, options)


def _checked(parser: MagicParser, args: RemoteArgs) -> RemoteArgs:
    if args.torch:
        for flag, given in (
            ("--point", args.point is not None),
            ("--rank", args.ranks is not None),
            ("--all", args.all_meshes),
        ):
            if given:
                parser.error(
                    f"--torch and {flag} exclude each other: torch's WORLD_SIZE counts every rank of "
                    "one mesh, so every rank of it must run (choose the mesh with --mesh)"
                )
    if args.session is not None:
        _check_session(parser, args)
    if args.detach:
        for flag, given in (("--timeout", args.timeout is not None), ("--save", args.save is not None)):
            if given:
                parser.error(
                    f"--detach and {flag} exclude each other: a detached run has no cell waiting for it"
                )
    return args


def _check_session(parser: MagicParser, args: RemoteArgs) -> None:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,39}", args.session or ""):
        parser.error(
            f"bad session name {args.session!r}: a letter or _, then letters, digits, _ . - (at most 40)"
        )
    if args.mode != "python":
        parser.error("--session keeps Python namespaces: %%remote python --session NAME")
    for flag, given in (("--detach", args.detach), ("--output-dir", args.output_dir is not None)):
        if given:
            parser.error(
                f"--session and {flag} exclude each other: a session cell runs in the namespaces, attached"
            )


def _words(line: str) -> tuple[list[str], list[int]]:
    """The line's shell words and where each starts in ``line`` (or in the space before it)."""
    stream = io.StringIO(line)  # what shlex would make of a str, kept to ask where a word starts
    lexer = shlex.shlex(stream, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: list[str] = []
    starts: list[int] = []
    try:
        while True:
            start = stream.tell()
            word = lexer.get_token()
            if word is None or word == lexer.eof:
                return words, starts
            words.append(word)
            starts.append(start)
    except ValueError as error:
        raise ArgumentsError(f"{LINE}: {error} in {line.strip()!r}") from None


def _parse(parser: MagicParser, words: list[str], unexpected: str = "") -> dict[str, Any]:
    """Parse ``words``; a word no definition takes is an error that names it."""
    namespace, extras = parser.parse_known_args(words)
    if extras:
        word = extras[0]
        if word.startswith("-"):
            parser.error(f"unknown flag {word!r}")
        parser.error(f"unexpected {word!r}" + (f"; {unexpected}" if unexpected else ""))
    options = vars(namespace)
    if "env" in options:
        options["env"] = tuple(options["env"] or ())
    return options
