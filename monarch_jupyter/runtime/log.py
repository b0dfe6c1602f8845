"""The ``monarch_jupyter`` logger and the one switch that shows its records and Monarch's.

Modules log through :func:`get` (children of ``monarch_jupyter``) at DEBUG where a decision is
made: the apply policy, attaching, a run's start and end, each engine step. Nothing shows by
default. :func:`set_debug` (``%env MONARCH_JUPYTER_DEBUG=1`` before ``%load_ext``, or
``%job debug on``) sends both loggers' records, at every level, to the current ``sys.stderr``
(in a kernel: the running cell) and lifts the filters of :mod:`.chatter` that keep Monarch's
chatter out of cells.
"""

from __future__ import annotations

import logging
import os
import sys

NAME = "monarch_jupyter"
DEBUG_VAR = "MONARCH_JUPYTER_DEBUG"
#: Monarch's root logger: its job modules log through children with their own stderr handler.
MONARCH = "monarch"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_state = {"on": False}
_levels: dict[str, int] = {}  # Monarch loggers with a level of their own, as they were


def get(name: str = NAME) -> logging.Logger:
    """The logger of module ``name`` (a child of ``monarch_jupyter``)."""
    return logging.getLogger(name if name.startswith(NAME) else f"{NAME}.{name}")


def debug_on() -> bool:
    """Whether the switch is on (the quiet filters then pass everything)."""
    return _state["on"]


class _CurrentStderr(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is at each record: in a kernel, the running cell."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter(FORMAT))

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


_handler = _CurrentStderr()


def set_debug(on: bool) -> None:
    """Show (or stop showing) every record of ``monarch_jupyter`` and Monarch."""
    _state["on"] = on
    _monarch_levels(on)
    for name in (NAME, MONARCH):
        logger = logging.getLogger(name)
        if on:
            logger.setLevel(logging.DEBUG)
            if _handler not in logger.handlers:
                logger.addHandler(_handler)
        else:
            logger.removeHandler(_handler)
            logger.setLevel(logging.NOTSET)


def _monarch_levels(on: bool) -> None:
    """Monarch's job modules set INFO on their own loggers: DEBUG while the switch is on."""
    if not on:
        for name, level in _levels.items():
            logging.getLogger(name).setLevel(level)
        _levels.clear()
        return
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if name.startswith(MONARCH + ".") and isinstance(logger, logging.Logger) and logger.level:
            _levels.setdefault(name, logger.level)
            logger.setLevel(logging.DEBUG)


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def from_env() -> bool:
    """Turn the switch on when ``$MONARCH_JUPYTER_DEBUG`` says so (read at ``%load_ext``)."""
    if truthy(os.environ.get(DEBUG_VAR)):
        set_debug(True)
    return debug_on()
