"""The verbs' registry: :func:`verb` declares one ``%remote VERB`` (its parser and handler),
:func:`dispatch` runs it, :class:`Cell` is what a handler is handed. Light to import (the
verbs are declared at ``%load_ext``): a handler imports what it runs with when it runs."""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ....text.parser import MagicParser
from ...view import args

if TYPE_CHECKING:
    from ....jobs.facade import JobContext
    from ...run.drive import RunHandle
    from ...run.runner import RemoteRunner
    from ...run.sessions import Sessions
    from ...view.args import RemoteArgs
    from ...view.model import Event, Observer, RunState
    from ...view.render import TextRenderer

Handler = Callable[..., Any]


class Cell(Protocol):
    """What a verb is handed by the magic: the session, its runner and the cell's output."""

    session: JobContext

    @property
    def runner(self) -> RemoteRunner:
        """The session's ``%%remote`` runner (made on first use)."""
        ...

    def run_observers(self) -> list[Observer]:
        """The observers a run shown in this cell gets (``remote.observers`` and the magic's)."""
        ...

    def write(self, text: str) -> None: ...

    def pump(
        self, state: RunState, renderer: TextRenderer, sink: queue.SimpleQueue[Event], handle: RunHandle
    ) -> bool:
        """Apply a run's events to ``state`` and show them until it finished; True if interrupted."""
        ...

    def display(self, bundle: dict[str, Any]) -> None: ...

    @property
    def sessions(self) -> Sessions:
        """The context's sessions (``--session``)."""
        ...

    @property
    def user_ns(self) -> dict[str, Any]:
        """The notebook's namespace (what ``%remote push`` sends from)."""
        ...

    def run_args(self, args: RemoteArgs) -> None:
        """Plan and run ``args`` in this cell, as ``%%remote`` would."""
        ...


@dataclass(frozen=True)
class Verb:
    name: str
    handler: Handler

    @property
    def parser(self) -> MagicParser:
        """Its parser (:data:`..args.VERBS`, built on first use)."""
        return args.VERBS[self.name]


#: verb name → its parser and handler, in the order ``%%remote?`` lists them
REGISTRY: dict[str, Verb] = {}


def arg(*flags: str, **options: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    """One argument of a verb, as ``parser.add_argument(*flags, **options)``."""
    return flags, options


def verb(
    name: str,
    description: str,
    *arguments: tuple[tuple[str, ...], dict[str, Any]],
    verbatim: str | None = None,
) -> Callable[[Handler], Handler]:
    """Register the decorated function as ``%remote name``'s handler, with its parser (with
    ``verbatim``: that option is the rest of the line after the flags, as typed)."""

    def register(handler: Handler) -> Handler:
        args.add_verb(name, description, arguments, verbatim)
        REGISTRY[name] = Verb(name, handler)
        return handler

    return register


def dispatch(cell: Cell, name: str, options: dict[str, Any]) -> Any:
    """Run verb ``name`` with the options its parser returned; what it returns (``%remote pull``'s
    values) is the line magic's value."""
    return REGISTRY[name].handler(cell, **options)
