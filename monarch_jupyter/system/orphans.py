"""Workers of an apply that never completed: recorded as they start, reaped later.

A ``ProcessJob`` starts its workers in sessions of their own, so when the kernel
dies (or is interrupted, or the apply fails) between the first ``Popen`` and the
cache write, nothing else knows about them. :class:`ApplyGuard` first writes
``.monarch/<context>/workers.pending.<kernel pid>`` with a fresh token that every
worker of this apply carries in its environment (``MONARCH_JUPYTER_APPLY``), then
each worker's PID and start time as it starts (for a person reading it), and removes
the file once the workers are in the cache or killed. Only processes carrying the
token are ever signalled, so a reused PID or a doctored record harms nothing. :func:`reap_leftovers`,
run by ``%load_ext`` and ``%job apply``, kills the sessions of workers recorded
by a kernel that is gone.

While the guard is on, an interrupt also stops a ``ProcessJob`` between two
spawns (Monarch's ``_create`` then reaps the ones already started).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..runtime import introspect as _introspect
from . import files as _files
from . import procfs as _procfs

PENDING_PREFIX = "workers.pending."
TOKEN_VAR = "MONARCH_JUPYTER_APPLY"
_GRACE_SECONDS = 1.0
_POLL_SECONDS = 0.05
_TERM_THEN_KILL = (signal.SIGTERM, signal.SIGKILL)


class ApplyAbandoned(KeyboardInterrupt):
    """Raised inside Monarch's spawn loop when the kernel gave up on the apply."""


class ApplyGuard:
    """Record the workers a ProcessJob apply spawns; stop spawning once abandoned."""

    def __init__(self, context_dir: Path, job: Any) -> None:
        self.path = Path(context_dir) / f"{PENDING_PREFIX}{os.getpid()}"
        self.job = job
        self.abandoned = threading.Event()
        self.token = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._saved_env: dict[str, str] | None = None
        self._unhook: Callable[[], None] | None = None

    def __enter__(self) -> ApplyGuard:
        from monarch.job import ProcessJob

        if isinstance(self.job, ProcessJob):
            _files.private_dir(self.path.parent)
            me = _procfs.start_ticks(os.getpid())
            with open(self.path, "w", opener=_files.private_opener) as out:
                out.write(f"owner {os.getpid()} {me}\ntoken {self.token} -\n")
            # ProcessJob passes its extra environment to every worker: the token marks
            # them all, even one whose PID the kernel died before recording.
            self._saved_env = _introspect.worker_env(self.job)
            _introspect.set_worker_env(self.job, {**(self._saved_env or {}), TOKEN_VAR: self.token})
            self._unhook = _introspect.watch_worker_spawns(self.job, self._spawned)
        return self

    def _spawned(self, pid: int) -> None:
        self.record(pid)
        if self.abandoned.is_set():
            raise ApplyAbandoned("the apply was interrupted")

    def __exit__(self, *exc: object) -> None:
        # The job is pickled into the cache next: drop the (unpicklable) hook and the token.
        if self._unhook is not None:
            self._unhook()
            self._unhook = None
            _introspect.set_worker_env(self.job, self._saved_env)

    def record(self, pid: int) -> None:
        with self._lock, open(self.path, "a", opener=_files.private_opener) as out:
            out.write(f"worker {pid} {_procfs.start_ticks(pid) if _procfs.alive(pid) else None}\n")

    def done(self) -> None:
        """The workers are in the cache, or killed: forget the record."""
        with contextlib.suppress(OSError):
            self.path.unlink()


def _read(path: Path) -> tuple[tuple[int, int | None] | None, list[tuple[int, int | None]], str | None]:
    owner, workers, token = None, [], None
    try:
        text = _files.read_text(path, what="worker record")
    except Exception:
        return None, [], None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "token" and parts[1].isalnum():
            token = parts[1]
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        start = int(parts[2]) if parts[2].isdigit() else None
        if parts[0] == "owner":
            owner = (int(parts[1]), start)
        elif parts[0] == "worker":
            workers.append((int(parts[1]), start))
    return owner, workers, token


def _carrying(token: str) -> list[int]:
    """Live processes (never this one, never a zombie) whose environment holds
    ``MONARCH_JUPYTER_APPLY=token``."""
    return _procfs.pids_with_env(TOKEN_VAR, {token}).get(token, [])


def stop_carrying(var: str, value: str, grace: float = _GRACE_SECONDS) -> set[int]:
    """SIGTERM every live process carrying ``var=value``, then SIGKILL those still carrying it
    ``grace`` seconds later (signalled by PID, looked up again before each signal); returns
    the PIDs found. For everything a run of ours started, given a fresh value to inherit."""

    def now() -> list[int]:
        return _procfs.pids_with_env(var, {value}).get(value, [])

    found = set(now())
    _procfs.escalate(
        lambda sig: [_procfs.kill(pid, sig) for pid in now()],
        lambda: bool(now()),
        grace,
        _TERM_THEN_KILL,
        _POLL_SECONDS,
    )
    return found


def _same(pid: int, start: int | None) -> bool:
    return start is not None and _procfs.alive(pid, start)


def leads_session(pid: int) -> bool:
    try:
        return os.getsid(pid) == pid
    except OSError:
        return False


def _in_sessions(pid: int, sessions: set[int]) -> bool:
    try:
        return os.getsid(pid) in sessions
    except OSError:
        return False


def _session_members(sessions: set[int]) -> list[int]:
    me = os.getpid()
    return [pid for pid in _procfs.pids() if pid != me and _in_sessions(pid, sessions) and _procfs.alive(pid)]


def kill_sessions(sessions: set[int], poll: float = _POLL_SECONDS) -> None:
    """SIGTERM then SIGKILL every process in ``sessions`` (workers lead their own), looking
    every ``poll`` seconds whether they are gone."""
    if not sessions:
        return
    _procfs.escalate(
        lambda sig: [_procfs.kill(pid, sig) for pid in _session_members(sessions)],
        lambda: bool(_session_members(sessions)),
        _GRACE_SECONDS,
        _TERM_THEN_KILL,
        poll,
    )


def _cached_after(record: Path) -> bool:
    """Whether the context's state.pkl was written after the record's last worker."""
    try:
        return os.stat(record.parent / "state.pkl").st_mtime_ns >= os.stat(record).st_mtime_ns
    except OSError:
        return False


def reaped_line(pids: list[int]) -> str | None:
    """One line about reaped leftovers, or None."""
    if not pids:
        return None
    shown = ", ".join(map(str, pids[:8])) + (", …" if len(pids) > 8 else "")
    return (
        f"stopped {len(pids)} worker process(es) left by an apply that never completed "
        f"(kernel killed, interrupted or failed): pid {shown}"
    )


def reap_leftovers(monarch_dir: Path) -> list[int]:
    """Kill the workers of applies whose kernel is gone; returns their PIDs.

    Records of a live kernel (an apply in progress elsewhere) are left alone.
    """
    monarch_dir = Path(monarch_dir)
    if not monarch_dir.is_dir():
        return []
    reaped: list[int] = []
    for record in sorted(monarch_dir.glob(f"*/{PENDING_PREFIX}*")):
        try:
            _files.check_trusted(record, what="worker record")
        except (OSError, _files.UnsafeFileError):
            continue  # not ours (or odd): never act on it
        owner, _workers, token = _read(record)
        if owner is not None and _same(*owner):
            continue  # that kernel (maybe this one) is alive and may still be applying
        if _cached_after(record):
            # The kernel died between writing the cache and removing the record:
            # these workers are the context's job now, not leftovers.
            with contextlib.suppress(OSError):
                record.unlink()
            continue
        # Only processes that carry this apply's token (every worker it spawned
        # does) are signalled: a record naming other PIDs cannot make us kill them.
        marked = _carrying(token) if token else []
        alive = {pid for pid in marked if leads_session(pid)}
        kill_sessions(alive)
        reaped.extend(sorted(alive))
        with contextlib.suppress(OSError):
            record.unlink()
    return reaped
