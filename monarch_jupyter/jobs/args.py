"""The ``%job`` command line: one argparse definition per subcommand, used both to
parse and to write ``%job?`` help and usage errors. Pure: no IPython, no Monarch.

``%job apply``'s spec keeps its own grammar (:func:`.specs.parse_apply`): the
text after ``apply`` is handed over exactly as typed.
"""

from __future__ import annotations

import functools
import shlex
from dataclasses import dataclass
from typing import Any

from ..text.parser import ArgumentsError, HelpRequested, LazyParsers, MagicParser


class _Parser(MagicParser):
    def __init__(self, prog: str, summary: str, description: str | None = None) -> None:
        super().__init__(prog, description=description or summary)
        self.summary = summary


#: The forms of ``%job apply SPEC`` (parsed by :func:`.specs.parse_apply`).
APPLY_FORMS = (
    ("--local MESH=N[,MESH=N...]", "start a local job: one worker process per host"),
    ("--local MESH=N --telemetry | --admin", "the same with Monarch's telemetry store (and mesh admin)"),
    (
        "--local MESH=N --mount SRC[:DST] --gather REMOTE:LOCAL",
        "the same with folder SRC on every worker (FUSE), every worker's REMOTE read-only at LOCAL",
    ),
    (
        "--ssh MESH=H1,H2 [--python PATH] [--port N] [--config FILE]",
        "start an SSHJob on hosts of your ssh config (they need torchmonarch of this version)",
    ),
    ("module.attr", "apply a JobTrait importable from the notebook's folder"),
    ("NAME", "apply the JobTrait held by notebook variable NAME"),
    ("", "re-apply the context's saved spec"),
)


def _line(synopsis: str, summary: str) -> str:
    if len(synopsis) >= 32:
        return f"{synopsis}\n{'':<32} {summary}"
    return f"{synopsis:<32} {summary}"


Argument = tuple[tuple[str, ...], dict[str, Any]]


def _arg(*flags: str, **options: Any) -> Argument:
    return flags, options


_CONTEXT = "another context (default: the active one)"

#: words → (summary, description or None, arguments): each subcommand's parser, built on first use
_COMMANDS: dict[str, tuple[str, str | None, tuple[Argument, ...]]] = {
    "status": (
        "show the job: class, apply id, state, meshes, URLs",
        None,
        (_arg("context", nargs="?", metavar="CONTEXT", help=_CONTEXT),),
    ),
    "apply": (
        "start the job of a spec (nothing, if the running job can already run it)",
        "\n".join(_line(f"%job apply {form}".strip(), text) for form, text in APPLY_FORMS),
        (_arg("spec", nargs="*", metavar="SPEC", help="--local MESH=N[,...], module.attr or NAME"),),
    ),
    "kill": (
        "reap the workers and remove the state file (or stop batch run ID)",
        None,
        (_arg("context", nargs="?", metavar="CONTEXT", help=f"{_CONTEXT}, or a batch run ID"),),
    ),
    # batch runs (batch.py)
    "batch": (
        "run a client script detached in its own folder, as Monarch's batch mode does",
        None,
        (
            _arg("script", metavar="SCRIPT"),
            _arg("spec", nargs="?", metavar="SPEC", help="a module.attr SlurmJob (default: this machine)"),
        ),
    ),
    "logs": (
        "print a batch run's output (--follow: live; Ctrl-C stops following only)",
        None,
        (
            _arg("name", metavar="ID"),
            _arg("-f", "--follow", action="store_true", help="stream new output until the run ends"),
        ),
    ),
    "query": (
        "SQL on the job's telemetry: its value is a pyarrow.Table (t = %job query ...)",
        "%job query [--pandas] SQL    the rows as a pyarrow.Table (--pandas: a DataFrame)\n"
        "%job query --tables          the telemetry tables and their columns",
        (
            _arg("--tables", action="store_true", help="list the tables and their columns"),
            _arg("--pandas", action="store_true", help="a pandas DataFrame instead"),
            _arg("sql", nargs="*", metavar="SQL", help="the query, as typed (the rest of the line)"),
        ),
    ),
    "profile": (
        "a Perfetto trace of the job's next N seconds, in the background (needs --telemetry)",
        None,
        (_arg("--seconds", type=float, default=10.0, metavar="N", help="the window (default 10)"),),
    ),
    "topology": (
        "the job's hosts, procs and actors (status, messages processed, queue, memory) from its mesh admin",
        None,
        (
            _arg("--system", action="store_true", help="Monarch's system actors too"),
            _arg(
                "--stuck-after",
                type=float,
                default=30.0,
                metavar="S",
                help="flag an actor whose handler has run this many seconds (default 30)",
            ),
        ),
    ),
    "reconnect": ("drop connections and re-attach from the cache", None, ()),
    "refresh": (
        "re-sync the job's --mount folders on the workers with their sources (edits show up)",
        None,
        (),
    ),
    "trust": (
        "accept a cache your kernels did not write (e.g. `monarch apply` in a terminal): "
        "shows its owner and time, signs it, attaches",
        None,
        (),
    ),
    "debug": (
        "show monarch_jupyter's and Monarch's log records in the cells (on), or stop (off)",
        None,
        (_arg("name", nargs="?", choices=("on", "off"), metavar="on|off", help="default: on"),),
    ),
    "context ls": ("list contexts (* marks the active one)", None, ()),
    "context use": ("switch the active context (attaches to its job)", None, (_arg("name", metavar="NAME"),)),
    "context create": ("create a context", None, (_arg("name", metavar="NAME"),)),
    "context rm": ("kill a context's job and delete the context", None, (_arg("name", metavar="NAME"),)),
}


def _build(words: str) -> _Parser:
    summary, description, arguments = _COMMANDS[words]
    parser = _Parser(f"%job {words}", summary, description)
    for flags, options in arguments:
        parser.add_argument(*flags, **options)
    return parser


def _declared() -> LazyParsers:
    parsers = LazyParsers()
    for words in _COMMANDS:
        parsers.declare(words, functools.partial(_build, words))
    return parsers


PARSERS = _declared()
VERBS = tuple(dict.fromkeys(words.split()[0] for words in _COMMANDS))
CONTEXT_ACTIONS = tuple(words.split()[1] for words in _COMMANDS if words.startswith("context "))


@dataclass(frozen=True)
class JobCommand:
    """A parsed ``%job`` line: ``command`` is e.g. ``"status"`` or ``"context use"``."""

    command: str
    context: str | None = None
    name: str | None = None
    script: str | None = None  # %job batch
    spec: str | None = None  # %job batch
    follow: bool = False  # %job logs
    seconds: float = 10.0  # %job profile
    spec_text: str = ""  # %job apply: the rest of the line, exactly as typed
    sql: str = ""  # %job query: the rest of the line after its flags, exactly as typed
    tables: bool = False  # %job query --tables
    pandas: bool = False  # %job query --pandas
    system: bool = False  # %job topology --system
    stuck_after: float = 30.0  # %job topology --stuck-after


def parse(line: str) -> JobCommand:
    """Parse a ``%job`` line; ArgumentsError (one line) or HelpRequested."""
    try:
        words = shlex.split(line)
    except ValueError as error:
        raise ArgumentsError(f"%job: {error} in {line.strip()!r}") from None
    if not words:  # bare `%job`, the command run most: no parser needed
        return JobCommand("status")
    verb = words[0]
    if verb in ("-h", "--help"):
        raise HelpRequested(help_text())
    if verb not in VERBS:
        raise ArgumentsError(f"%job: unknown subcommand {verb!r}; use {_choices(VERBS)} (see %job?)")
    if verb == "apply":
        rest = line.strip()[len(verb) :].strip()
        if rest in ("-h", "--help"):
            raise HelpRequested(PARSERS["apply"].format_help())
        return JobCommand("apply", spec_text=rest)
    if verb == "query":
        return _query(line.strip()[len(verb) :].strip())
    args = words[1:]
    command = verb
    if verb == "context":
        action = args[0] if args else "ls"
        if action in ("-h", "--help"):
            raise HelpRequested(help_text())
        if action not in CONTEXT_ACTIONS:
            raise ArgumentsError(f"%job context: unknown action {action!r}; use {_choices(CONTEXT_ACTIONS)}")
        command, args = f"context {action}", args[1:]
    parsed = PARSERS[command].parse_args(args)
    return JobCommand(
        command,
        context=getattr(parsed, "context", None),
        name=getattr(parsed, "name", None),
        script=getattr(parsed, "script", None),
        spec=getattr(parsed, "spec", None) if command == "batch" else None,
        follow=bool(getattr(parsed, "follow", False)),
        system=bool(getattr(parsed, "system", False)),
        stuck_after=float(getattr(parsed, "stuck_after", 30.0)),
        seconds=float(getattr(parsed, "seconds", 10.0)),
    )


def _query(rest: str) -> JobCommand:
    """``%job query``: leading flags, then the SQL exactly as typed (quotes and all)."""
    flags: set[str] = set()
    while True:
        word, _, tail = rest.partition(" ")
        if word in ("-h", "--help"):
            raise HelpRequested(PARSERS["query"].format_help())
        if word not in ("--tables", "--pandas"):
            break
        flags.add(word)
        rest = tail.strip()
    if rest.startswith("--"):
        raise ArgumentsError(f"%job query: unknown option {rest.split()[0]!r}; use --tables or --pandas")
    if "--tables" in flags and rest:
        raise ArgumentsError("%job query --tables takes no SQL")
    if not rest and "--tables" not in flags:
        raise ArgumentsError("%job query: give the SQL, e.g. %job query SELECT * FROM actors LIMIT 5")
    return JobCommand("query", sql=rest, tables="--tables" in flags, pandas="--pandas" in flags)


def _choices(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1]


def help_text() -> str:
    """The command listing of ``%job?``, from the parsers above."""
    lines: list[str] = []
    for words in _COMMANDS:
        parser = PARSERS[words]
        assert isinstance(parser, _Parser), "built by _build"
        if words == "apply":
            lines.extend((parser.description or "").splitlines())
            continue
        synopsis = "%job [status [CONTEXT]]" if words == "status" else parser.synopsis
        lines.append(_line(synopsis, parser.summary))
    return "\n".join(lines)
