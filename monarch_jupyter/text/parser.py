"""argparse for magics: one definition parses a magic's line and writes its help.

Shared by ``%job`` (:mod:`..jobs.args`) and ``%%remote`` (:mod:`..remote.view.args`). A
parser never exits or prints: a bad line is one :class:`ArgumentsError` line and
``-h``/``--help`` is a :class:`HelpRequested` carrying the text to show. Pure: no
IPython, no Monarch.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Iterator, MutableMapping

from ..errors import MonarchJupyterError

#: Help is wrapped at a fixed width, so ``%magic?`` reads the same in every kernel.
HELP_WIDTH = 88


class ArgumentsError(MonarchJupyterError):
    """A magic's line that does not parse: one line that starts with the magic and says what to do."""


class HelpRequested(Exception):
    """``-h``/``--help`` was given; ``text`` is the help to show."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; ``-e, --env KEY=VALUE`` rather than argparse's
    ``-e KEY=VALUE, --env KEY=VALUE`` (the default from Python 3.13 on)."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings or action.nargs == 0:
            return super()._format_action_invocation(action)
        metavar = self._format_args(action, self._get_default_metavar_for_optional(action))
        return f"{', '.join(action.option_strings)} {metavar}"


class MagicParser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of exiting; ``prog`` is the magic as typed
    (``%job kill``, ``%%remote``). ``hint`` ends every error (by default the usage);
    ``help_text`` writes what ``-h`` shows (by default argparse's help)."""

    def __init__(
        self, prog: str, hint: str | None = None, help_text: Callable[[], str] | None = None, **kwargs: object
    ) -> None:
        kwargs.setdefault(
            "formatter_class",
            functools.partial(_Formatter, width=HELP_WIDTH, max_help_position=30),
        )
        super().__init__(prog=prog, allow_abbrev=False, **kwargs)  # type: ignore[arg-type]
        self.hint = hint
        self.help_text = help_text

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ArgumentsError(f"{self.prog}: {message} ({self.hint or 'usage: ' + self.synopsis})")

    def print_help(self, file: object = None) -> None:
        raise HelpRequested(self.help_text() if self.help_text else self.format_help().rstrip("\n"))

    @property
    def synopsis(self) -> str:
        """The usage on one line, without ``[-h]``."""
        usage = " ".join(self.format_usage().split()).removeprefix("usage: ")
        return usage.replace(" [-h]", "")

    def options(self) -> list[tuple[tuple[str, ...], bool, str]]:
        """Every flag as (its option strings, whether it takes a value, its dest), help flags
        excepted: what completion offers."""
        return [
            (tuple(action.option_strings), action.nargs != 0, action.dest)
            for action in self._actions
            if action.option_strings and action.dest != "help"
        ]

    def positionals(self) -> list[str]:
        """The dests of the positional arguments, in order."""
        return [action.dest for action in self._actions if not action.option_strings]


class LazyParsers(MutableMapping[str, MagicParser]):
    """Parsers by name, each built by its declared builder on first use (argparse's
    ``add_argument`` and its gettext look-ups are most of a parser's cost, and ``%load_ext``
    needs none of them); iterated in declaration order. A parser set directly is kept as is."""

    def __init__(self) -> None:
        self._builders: dict[str, Callable[[], MagicParser]] = {}
        self._built: dict[str, MagicParser] = {}

    def declare(self, name: str, build: Callable[[], MagicParser]) -> None:
        self._builders[name] = build
        self._built.pop(name, None)

    def __getitem__(self, name: str) -> MagicParser:
        parser = self._built.get(name)
        if parser is None:
            parser = self._built[name] = self._builders[name]()
        return parser

    def __setitem__(self, name: str, parser: MagicParser) -> None:
        self._builders[name] = lambda: parser
        self._built[name] = parser

    def __delitem__(self, name: str) -> None:
        del self._builders[name]
        self._built.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._builders

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._builders))

    def __len__(self) -> int:
        return len(self._builders)

    def copy(self) -> LazyParsers:
        """Another mapping with the same declarations (and the parsers built so far)."""
        other = LazyParsers()
        other._builders = dict(self._builders)
        other._built = dict(self._built)
        return other
