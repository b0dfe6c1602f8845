"""``%load_ext`` without waiting for Monarch: the attach goes on in the background.

Re-attaching after a kernel restart means unpickling the cached job, which
imports Monarch (about half a second), then connecting to its workers. The
load itself need not wait for that: :func:`begin` says what the cache holds
from plain files — the context's ``status.json`` that the kernel side writes,
checked against the pickle's mtime, and the worker PIDs in it checked in
``/proc`` — and leaves the unpickling and the connection to a background
thread (:class:`Warmup`) started when the loading cell ends. The session waits
for that thread before its next use (``JobContext.ready_hook``); the wait is
interruptible and a Ctrl-C in it is one line.

Anything the plain files cannot vouch for (no ``status.json``, one older than
the pickle, an engine whose workers are not on this machine) gets a line that says only that
the job is being attached; ``%job`` then shows what came of it. A cache that
the session would refuse (not ours, empty, not a pickle) takes the ordinary
synchronous path, which reports it at once without importing Monarch.
"""

from __future__ import annotations

import contextlib
import os
import pickletools
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Interrupted, MonarchJupyterError
from ..text import timefmt as _timefmt
from . import cache, formatting
from . import signing as _signing
from .contexts import DEFAULT_CONTEXT
from .local_records import status_from_files
from .status import WORKERS_DEAD

if TYPE_CHECKING:
    from .facade import JobContext

_POLL_SECONDS = 0.05
# Importing Monarch holds the GIL (and the import lock) for long stretches: started while
# a cell runs, it slows that cell, and started the moment the loading cell ends it delays
# the kernel's reply and idle status. So it begins once no cell has run for START_DELAY s,
# or when a cell has run for HOLD_MAX s (a long cell of the user's: it overlaps it), or at
# once when a command needs the job.
START_DELAY = 0.1
HOLD_MAX = 2.0
_MAX_PICKLE = 16 << 20  # a bigger cache is not checked here: the synchronous path reads it


class AttachInterrupted(Interrupted):
    """Ctrl-C while a command waited for the background attach: one line, no traceback."""


class Warmup:
    """One background attach of ``session``; :meth:`wait` is the session's ready hook."""

    def __init__(self, session: JobContext, context: str, after: Callable[[], object] | None = None) -> None:
        self._session = session
        self._context = context
        self._after = after  # run on this thread once attached (the remote actors' spawn)
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._needed = False
        self._begun = False  # the attach itself started (past the delay): it can no longer be called off
        self._cancelled = False
        self._idle_since = time.monotonic()
        self._busy_since: float | None = None  # a cell runs since then

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def start(self, delay: float = 0.0) -> None:
        """Start the attach thread (once); it begins after ``delay`` s without a cell running
        (see ``HOLD_MAX``) unless :meth:`wait` is called."""
        with self._lock:
            if self._thread is None:
                self._idle_since = time.monotonic()
                self._thread = threading.Thread(
                    target=self._run, args=(delay,), name="monarch-jupyter-attach", daemon=True
                )
                self._thread.start()

    def cell_started(self, *_args: Any) -> None:
        with self._lock:
            self._busy_since = time.monotonic()

    def cell_ended(self, *_args: Any) -> None:
        with self._lock:
            self._busy_since = None
            self._idle_since = time.monotonic()
            self._lock.notify_all()

    def _hold(self, delay: float) -> None:
        """Until ``delay`` s passed with no cell running, a cell ran ``HOLD_MAX`` s, or it is needed."""
        with self._lock:
            while not self._needed:
                now = time.monotonic()
                if self._busy_since is None:
                    left = self._idle_since + delay - now
                else:
                    left = self._busy_since + HOLD_MAX - now
                if left <= 0:
                    return
                self._lock.wait(left)

    def _run(self, delay: float) -> None:
        self._hold(delay)
        with self._lock:
            if self._cancelled:
                return
            self._begun = True
        try:
            # Unpickling imports Monarch here; the connection itself runs on the
            # session's loop worker, as every blocking Monarch call does.
            self._session.attach()
        except BaseException:  # Monarch's PanicException is a BaseException
            pass  # the session's next call meets the same problem and reports it in its own cell
        finally:
            self._done.set()
        if self._after is not None and not self._cancelled and self._session.attached:
            # after _done: no command waits for it; a failure is the next run's to report
            with contextlib.suppress(BaseException):
                self._after()

    def pending(self) -> bool:
        """The attach has not finished, and this is not its own thread asking."""
        return not self._done.is_set() and threading.current_thread() is not self._thread

    def cancel(self) -> bool:
        """Call the attach off unless it began (``%job kill`` of a job it need not attach);
        whether it was. The session's hooks are dropped then: nothing waits for it any more."""
        with self._lock:
            if self._begun:
                return False
            self._cancelled = self._needed = True  # a thread holding back ends now
            self._done.set()
            self._lock.notify_all()
        self._forget()
        return True

    def wait(self) -> None:
        """Block until the attach finished; Ctrl-C raises :class:`AttachInterrupted`."""
        if self._done.is_set() or threading.current_thread() is self._thread:
            return
        with self._lock:
            self._needed = True
            self._lock.notify_all()
        self.start()
        try:
            while not self._done.wait(_POLL_SECONDS):
                pass
        except KeyboardInterrupt:
            raise AttachInterrupted(
                f"stopped waiting for the job of context '{self._context}' to attach; "
                "it goes on in the background: run the cell again"
            ) from None
        self._forget()

    def _forget(self) -> None:
        if self._session.ready_hook == self.wait:
            self._session.ready_hook = None
            self._session.background = None


def begin(session: JobContext, ipython: Any = None, after: Callable[[], object] | None = None) -> str:
    """The line ``%load_ext`` prints; schedules the attach when there is a cached job.

    With ``ipython`` the attach thread starts after the current cell (so the
    cell returns to the prompt first); without, at once. Any use of the session
    before then starts it and waits. ``after`` runs on that thread once the job is attached
    (the composition root's: the ``%%remote`` actors spawned ahead of the first run).
    """
    layout = session.layout
    try:
        context = layout.current()
        legacy = layout.legacy_state() if context == DEFAULT_CONTEXT else None
        path = legacy or layout.state_path(context)
        info = os.stat(path)
    except (OSError, MonarchJupyterError):
        info = None
    if info is None or session.attached or not _looks_loadable(path, info):
        # No cache, a job attached already (%reload_ext), or a cache the session
        # refuses before unpickling: cheap and exact.
        try:
            return formatting.attach_line(session.attach())
        except MonarchJupyterError as error:
            return f"monarch_jupyter: {error}"

    warmup = Warmup(session, context, after)
    session.ready_hook = warmup.wait
    session.background = warmup
    if ipython is not None and hasattr(ipython, "events"):
        _follow_cells(ipython, warmup)
    else:
        warmup.start()
    status = status_from_files(layout, context, info)
    if status is None:
        return (
            f"monarch_jupyter: attaching to the cached job of context '{context}' in the background; "
            "%job shows it"
        )
    if status.state == WORKERS_DEAD:
        return formatting.attach_line(status)
    what = f"{status.job_class} {formatting.short_id(status.apply_id)}"
    when = f", applied {_timefmt.age(time.time() - status.applied_at)} ago" if status.applied_at else ""
    return (
        f"monarch_jupyter: re-attaching to context '{context}': {what}, {formatting.meshes_text(status)}, "
        f"apply id {status.apply_id}{when}"
    )


def _follow_cells(ipython: Any, warmup: Warmup) -> None:
    """Start ``warmup`` when the loading cell ends and tell it when cells start and end."""
    events = ipython.events

    def started(*args: Any) -> None:
        if warmup.done:
            events.unregister("pre_run_cell", started)
        warmup.cell_started(*args)

    def ended(*args: Any) -> None:
        if warmup.done:
            events.unregister("post_run_cell", ended)
        warmup.cell_ended(*args)
        warmup.start(START_DELAY)

    events.register("pre_run_cell", started)
    events.register("post_run_cell", ended)


def _looks_loadable(path: Path, info: os.stat_result) -> bool:
    """Whether ``cache.load_job`` would get as far as unpickling (without running the pickle)."""
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0 or info.st_size > _MAX_PICKLE:
        return False
    try:
        cache.check_safe(path)
        with open(path, "rb") as stream:
            data = stream.read(_MAX_PICKLE)
        if _signing.check(path, data) is not None:
            return False  # not signed by our kernels: the synchronous path says so, unpickling nothing
        for _ in pickletools.genops(data):
            pass
    except Exception:  # anything odd: let the synchronous path say what
        return False
    return True
