"""Keep Monarch's own chatter out of notebook cells.

- The job module logs INFO lines ("Found cached job …") to stderr with its own
  handler; we keep only warnings from those loggers. ProcessJob's watcher
  threads warn "worker died unexpectedly" into whichever cell is running; a
  dead worker is what ``%job`` and ``%%remote`` report in their own cells, so
  that logger keeps only errors.
- Every blocking ``Future.get()`` on a thread with a running loop (a cell, in a
  kernel) logs "Future.get() called from within an active event loop" through
  a logger that ignores levels, and warns a UserWarning. Both are noise in a
  notebook, where a loop always runs: we filter that one message.
- The first client context prints "Monarch internal logs are being written to
  …" straight to fd 2 from Rust; :func:`quietly` swallows it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from typing import Iterator

from . import _faults

_GET_IN_LOOP = "Future.get() called from within an active event loop"
_CHATTY_LOGGERS = {
    "monarch._src.job.job": logging.WARNING,
    "monarch.tools": logging.WARNING,
    "monarch._src.job.process": logging.ERROR,
}


class _AtLeast(logging.Filter):
    """Monarch's job module resets its logger to INFO on import; a filter sticks."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.level


class _DropGetInLoop(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_GET_IN_LOOP)


_installed = False


def install() -> None:
    """Install the filters once per process (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    for name, level in _CHATTY_LOGGERS.items():
        logging.getLogger(name).addFilter(_AtLeast(level))
    logging.getLogger("monarch._src.actor.telemetry").addFilter(_DropGetInLoop())
    warnings.filterwarnings(
        "ignore", message=r"Future\.get\(\) was called from within an active event loop"
    )


@contextlib.contextmanager
def quietly(log_path: str | None = None) -> Iterator[None]:
    """Send fds 1 and 2 to ``log_path`` (or /dev/null) for the duration."""
    sys.stdout.flush()
    sys.stderr.flush()
    target = os.open(log_path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(target)


_context_ready = False


def start_client_context() -> None:
    """Create Monarch's client context once, with its fd-2 banner swallowed and
    the fault hook that keeps a dead proc from exiting the kernel (see _faults)."""
    global _context_ready
    if _context_ready:
        return
    install()
    _faults.install()
    from monarch.actor import context

    with quietly():
        context()
    _context_ready = True
