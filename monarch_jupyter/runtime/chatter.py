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
  …" straight to fd 2 from Rust. :func:`quietly` drops that line, and only
  that: for its duration fds 1 and 2 go through pipes whose every other byte is
  re-emitted, so what another thread (or Monarch, failing) writes meanwhile
  still reaches the cell.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import select
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

from . import faults as _faults
from . import log as _log

_GET_IN_LOOP = "Future.get() called from within an active event loop"
_CHATTY_LOGGERS = {
    "monarch._src.job.job": logging.WARNING,
    "monarch.tools.network": logging.WARNING,  # a filter acts on its own logger, not on children
    "monarch._src.job.process": logging.ERROR,
}


class _AtLeast(logging.Filter):
    """Monarch's job module resets its logger to INFO on import; a filter sticks."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.level or _log.debug_on()


class _DropGetInLoop(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_GET_IN_LOOP) or _log.debug_on()


#: ProcessJob's waiter thread logs each worker's end, ``… pid=%d exit_code=%d …`` (its args the pid and
#: the code); the filter above drops the record, so it is read first: pid → Popen return code.
_PROCESS_LOGGER = "monarch._src.job.process"
_WORKER_END = "ProcessJob: worker "
WORKER_EXITS: dict[int, int] = {}


class _WorkerExits(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if str(record.msg).startswith(_WORKER_END) and isinstance(args, tuple) and len(args) >= 2:
            pid, code = args[0], args[1]
            if isinstance(pid, int) and isinstance(code, int):
                WORKER_EXITS[pid] = code
        return True


def worker_exit(pid: int) -> int | None:
    """How a local worker this kernel started ended (a ``subprocess`` return code), if it did."""
    return WORKER_EXITS.get(pid)


_installed = False


def install() -> None:
    """Install the filters once per process (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    logging.getLogger(_PROCESS_LOGGER).addFilter(_WorkerExits())  # before the level filter below
    for name, level in _CHATTY_LOGGERS.items():
        logging.getLogger(name).addFilter(_AtLeast(level))
    logging.getLogger("monarch._src.actor.telemetry").addFilter(_DropGetInLoop())
    warnings.filterwarnings("ignore", message=r"Future\.get\(\) was called from within an active event loop")


#: Starts of the lines Monarch writes to fd 1/2 that a notebook should not show.
CHATTER = (b"Monarch internal logs are being written to ",)
#: Starts of the banner lines Monarch's job services print (the mesh admin's address, its curl
#: hints and build-tool lines; the dashboard's link): written to the apply log, not the cell.
BANNERS = (
    b"Mesh admin server listening on ",
    b"  - Root node:",
    b"  - Mesh tree:",
    b"  - API docs:",
    b"  - TUI:",
    b"                   cargo run -p hyperactor_mesh_admin_tui",
    b"Monarch Dashboard: ",
)
_IDLE_FLUSH = 0.1  # a partial line (a prompt, a progress bar) is passed on after this idle time


def is_chatter(line: bytes) -> bool:
    return line.startswith(CHATTER)


def is_banner(line: bytes) -> bool:
    return line.startswith(BANNERS)


def _could_become_chatter(partial: bytes) -> bool:
    """Whether ``partial`` (no newline yet) may still turn out to be a chatter or banner line."""
    return any(partial.startswith(prefix) or prefix.startswith(partial) for prefix in CHATTER + BANNERS)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Forwarder(threading.Thread):
    """Copies one pipe to ``out_fd`` line by line, dropping chatter, until EOF.

    ``drained`` is set once ``closing`` is set and the pipe has been read empty
    (or at EOF): what was written in the window has been passed on.
    """

    def __init__(self, read_fd: int, out_fd: int, log_fd: int | None = None) -> None:
        super().__init__(name="monarch-jupyter-quiet", daemon=True)
        self.read_fd, self.out_fd, self.log_fd = read_fd, out_fd, log_fd
        self.closing = threading.Event()
        self.drained = threading.Event()

    def run(self) -> None:
        pending = b""
        try:
            while True:
                ready, _, _ = select.select([self.read_fd], [], [], _IDLE_FLUSH)
                if not ready:
                    if pending and not _could_become_chatter(pending):
                        _write_all(self.out_fd, pending)
                        pending = b""
                    if self.closing.is_set():
                        self.drained.set()  # a child still holds the pipe: keep forwarding it
                    continue
                data = os.read(self.read_fd, 65536)
                if not data:
                    break
                *lines, pending = (pending + data).split(b"\n")
                self._emit(lines)
            if pending:
                self._emit([pending], newline=b"")
        finally:
            self.drained.set()
            os.close(self.read_fd)
            os.close(self.out_fd)
            if self.log_fd is not None:
                os.close(self.log_fd)

    def _emit(self, lines: list[bytes], newline: bytes = b"\n") -> None:
        """Chatter is dropped, banners go to the log (if any), the rest to ``out_fd``."""
        banners = b"".join(line + newline for line in lines if is_banner(line))
        kept = b"".join(line + newline for line in lines if not is_chatter(line) and not is_banner(line))
        if banners and self.log_fd is not None:
            _write_all(self.log_fd, banners)
        if kept:
            _write_all(self.out_fd, kept)


_window = threading.RLock()
_depth = 0


@contextlib.contextmanager
def quietly(log: Path | None = None) -> Iterator[None]:
    """Drop Monarch's banner and chatter from fds 1 and 2 for the duration; pass on the rest.
    The job services' :data:`BANNERS` go to ``log`` (dropped without one).

    Each fd is pointed at a pipe; a forwarder thread re-emits every line that is
    not :data:`CHATTER` to the original fd. On exit the fds are restored and the
    pipes drained; a child process that inherited a pipe (SSHJob's ssh client
    does) keeps its forwarder alive until it closes it, so its output is not
    lost either, and the exit waits at most ~0.1 s for it. One window at a
    time; a nested call joins the open one.
    """
    global _depth
    with _window:
        if _depth:
            yield
            return
        sys.stdout.flush()
        sys.stderr.flush()
        opened: list[tuple[int, int, _Forwarder]] = []
        log_fd = _open_log(log)
        try:
            for fd in (1, 2):
                saved = os.dup(fd)
                read_end, write_end = os.pipe()
                forwarder = _Forwarder(read_end, os.dup(saved), None if log_fd is None else os.dup(log_fd))
                forwarder.start()
                os.dup2(write_end, fd)
                os.close(write_end)
                opened.append((fd, saved, forwarder))
            _depth += 1
            yield
        finally:
            _depth = 0
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, saved, forwarder in opened:
                os.dup2(saved, fd)
                os.close(saved)
                forwarder.closing.set()
            for _, _, forwarder in opened:
                forwarder.drained.wait(timeout=1.0)
            if log_fd is not None:
                os.close(log_fd)


def _open_log(log: Path | None) -> int | None:
    """An append fd on ``log`` (0600, no symlink followed; its folder made, as a new context's is
    only at commit), or None (none given, or unopenable)."""
    if log is None:
        return None
    try:
        log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    except OSError:
        return None


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


# a Rust backtrace's first line, or one of its frames (``  12: hyperactor::…``)
_BACKTRACE = re.compile(r"^\s*(?:stack backtrace:|backtrace:|\d+: (?:0x[0-9a-f]+ - )?\S+::)", re.I | re.M)
ERROR_CHARS = 600  # an error's text shown in a cell is cut to this (the debug log keeps it whole)


def error_text(error: BaseException) -> str:
    """``SupervisionError: …`` without Monarch's Rust backtrace, at most ``ERROR_CHARS`` long:
    what a cell shows. The whole text goes to the debug log (``%job debug on``)."""
    text = str(error)
    _log.get(__name__).debug("%s: %s", type(error).__name__, text)
    cut = _BACKTRACE.search(text)
    if cut is not None:
        text = text[: cut.start()].rstrip() + " (Rust backtrace in the debug log)"
    if len(text) > ERROR_CHARS:
        text = text[:ERROR_CHARS] + "…"
    return f"{type(error).__name__}: {text}"
