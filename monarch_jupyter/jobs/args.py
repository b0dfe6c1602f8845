"""The ``%job`` command line: each verb's parser, built on first use from what the verb declared
(:mod:`.verbs`), used both to parse and to write ``%job?`` help and usage errors. Pure: no
IPython, no Monarch.

``%job apply``'s spec keeps its own grammar (:func:`.specs.parse_apply`): the
text after ``apply`` is handed over exactly as typed.
"""

from __future__ import annotations

import functools
import shlex
from dataclasses import dataclass, field
from typing import Any

from ..text.parser import ArgumentsError, HelpRequested, LazyParsers, MagicParser
from .verbs import REGISTRY
from .verbs.lifecycle import listing


class _Parser(MagicParser):
    def __init__(self, prog: str, summary: str, description: str | None = None) -> None:
        super().__init__(prog, description=description or summary)
        self.summary = summary


def _build(words: str) -> _Parser:
    declared = REGISTRY[words]
    parser = _Parser(f"%job {words}", declared.summary, declared.description)
    for flags, options in declared.arguments:
        parser.add_argument(*flags, **options)
    return parser


def _declared() -> LazyParsers:
    parsers = LazyParsers()
    for words in REGISTRY:
        parsers.declare(words, functools.partial(_build, words))
    return parsers


PARSERS = _declared()
VERBS = tuple(dict.fromkeys(words.split()[0] for words in REGISTRY))
CONTEXT_ACTIONS = tuple(words.split()[1] for words in REGISTRY if words.startswith("context "))


@dataclass(frozen=True)
class JobCommand:
    """A parsed ``%job`` line: ``command`` is a verb's words (``"status"``, ``"context use"``) and
    ``options`` what its handler is called with (its parser's destinations)."""

    command: str
    options: dict[str, Any] = field(default_factory=dict)


def parse(line: str) -> JobCommand:
    """Parse a ``%job`` line; ArgumentsError (one line) or HelpRequested."""
    try:
        words = shlex.split(line)
    except ValueError as error:
        raise ArgumentsError(f"%job: {error} in {line.strip()!r}") from None
    if not words:  # bare `%job`, the command run most: no parser needed
        return JobCommand("status", {"context": None})
    verb = words[0]
    if verb in ("-h", "--help"):
        raise HelpRequested(help_text())
    if verb not in VERBS:
        raise ArgumentsError(f"%job: unknown subcommand {verb!r}; use {_choices(VERBS)} (see %job?)")
    if verb == "apply":
        rest = line.strip()[len(verb) :].strip()
        if rest in ("-h", "--help"):
            raise HelpRequested(PARSERS["apply"].format_help())
        return JobCommand("apply", {"spec_text": rest})
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
    return JobCommand(command, vars(PARSERS[command].parse_args(args)))


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
    return JobCommand("query", {"sql": rest, "tables": "--tables" in flags, "pandas": "--pandas" in flags})


def _choices(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1]


def help_text() -> str:
    """The command listing of ``%job?``, from the parsers above."""
    lines: list[str] = []
    for words in REGISTRY:
        parser = PARSERS[words]
        assert isinstance(parser, _Parser), "built by _build"
        if words == "apply":
            lines.extend((parser.description or "").splitlines())
            continue
        synopsis = "%job [status [CONTEXT]]" if words == "status" else parser.synopsis
        lines.append(listing(synopsis, parser.summary))
    return "\n".join(lines)
