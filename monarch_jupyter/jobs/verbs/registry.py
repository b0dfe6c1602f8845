"""The ``%job`` verbs' registry: :func:`verb` declares one ``%job WORDS`` (its parser's summary and
arguments, and its handler) in one place; :func:`dispatch` runs it; :class:`Cell` is what a
handler is handed. Light to import and free of IPython: ``jobs/args.py`` builds the parsers from
here, and ``%load_ext`` declares the verbs without importing what they run with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..facade import JobContext
    from ..status import JobStatus

Handler = Callable[..., Any]
Argument = tuple[tuple[str, ...], dict[str, Any]]


def _no_view(session: JobContext, status: JobStatus) -> bool:
    return False


def _no_runs(session: JobContext) -> str | None:
    return None


@dataclass(frozen=True)
class JobHooks:
    """What the composition root (``extension/load.py``) plugs into ``%job``: the live view and
    ``%%remote``'s runs, which the job side does not import (they import it)."""

    #: displays a live view of ``status`` and returns True, or returns False (text is shown then)
    show_status: Callable[[JobContext, JobStatus], bool] = _no_view
    #: stops the context's runs before its job is killed; the line to print about them, if any
    stop_runs: Callable[[JobContext], str | None] = _no_runs
    #: one line about the context's runs still running, if any
    runs_note: Callable[[JobContext], str | None] = _no_runs


class Cell(Protocol):
    """What a verb is handed by the magic: the session, the hooks the composition root plugged in,
    the notebook's namespace and the cell's output."""

    session: JobContext
    hooks: JobHooks
    topology: Any  # the last %job topology sample: the next one is judged against it

    @property
    def user_ns(self) -> dict[str, Any] | None: ...

    def display(self, value: Any, **options: Any) -> Any:
        """IPython's ``display`` in the running cell; returns its handle with ``display_id=True``."""
        ...

    def install_query_display(self) -> None:
        """The formatters for the tables ``%job query`` returns (once per shell)."""
        ...


@dataclass(frozen=True)
class Verb:
    words: str  # "kill", "context use"
    summary: str  # one line, in %job?'s listing
    description: str | None  # the parser's description, when more than the summary
    arguments: tuple[Argument, ...]
    handler: Handler


#: words → the verb, in the order ``%job?`` lists them
REGISTRY: dict[str, Verb] = {}


def arg(*flags: str, **options: Any) -> Argument:
    """One argument of a verb, as ``parser.add_argument(*flags, **options)``."""
    return flags, options


def verb(
    words: str, summary: str, *arguments: Argument, description: str | None = None
) -> Callable[[Handler], Handler]:
    """Register the decorated function as ``%job words``'s handler, with its parser's arguments;
    the handler is called as ``handler(cell, **options)`` with what its parser returned."""

    def register(handler: Handler) -> Handler:
        REGISTRY[words] = Verb(words, summary, description, arguments, handler)
        return handler

    return register


def dispatch(cell: Cell, words: str, options: dict[str, Any]) -> Any:
    """Run verb ``words`` with ``options``; its return value is the cell's value."""
    return REGISTRY[words].handler(cell, **options)


def given(value: str | None, words: str) -> str:
    """A word the parser requires for ``%job words`` (NAME, SCRIPT): a parser that takes
    ``nargs="?"`` elsewhere may leave it out."""
    from ...errors import MonarchJupyterError

    if value is None:  # shown by the magic as "%job WORDS: a name is missing"
        raise MonarchJupyterError("a name is missing")
    return value


def say(line: str | None) -> None:
    """Print ``line`` when there is one."""
    if line:
        print(line)
