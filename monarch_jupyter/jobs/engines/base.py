"""The :class:`Engine` interface: the steps around ``%job apply`` and re-attach that
depend on how a job's workers are started and reached.

``JobContext``, ``lifecycle`` and ``status`` call these steps for every job through
:func:`monarch_jupyter.jobs.engines.engine_for`; each step is a no-op here, so an engine
overrides only what its jobs need. Progress lines go to stdout, i.e. the apply cell.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar

from ...runtime import introspect as _introspect
from ...system import procfs as _procfs
from .transport import LOOPBACK_FIX

Sizes = dict[str, int | None]


def progress(text: str) -> None:
    print(f"monarch_jupyter: {text}", flush=True)


@contextlib.contextmanager
def fds_to(log: Path) -> Iterator[None]:
    """Point fds 1 and 2 at ``log`` for the duration (children started meanwhile keep it)."""
    sys.stdout.flush()
    sys.stderr.flush()
    target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
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


class Engine:
    """One kind of job: how it is prepared, started, interrupted, re-attached and judged.

    A subclass must say ``workers_are_local`` and :meth:`claims`; every other step
    defaults to doing nothing (Monarch's own behaviour)."""

    #: Whether ``_introspect.worker_pids`` are the workers themselves, on this machine,
    #: so that this machine's /proc may judge them (and a lost one's group be killed).
    workers_are_local: ClassVar[bool]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not isinstance(getattr(cls, "workers_are_local", None), bool):
            raise TypeError(f"{cls.__name__} must say workers_are_local = True or False")

    def claims(self, job: Any) -> bool:
        """Whether this engine handles ``job`` (asked in :func:`~.engine_for`'s order)."""
        raise NotImplementedError

    def reach(self, job: Any) -> str:
        """Who can connect to the job's workers, and so run code in them as this user (``%job``'s
        ``reach`` row): Monarch 0.7 checks no peer on any transport."""
        return "whoever can reach its workers' addresses (Monarch 0.7 checks no peer)"

    # ── apply ───────────────────────────────────────────────────────────
    def prepare(self, job: Any) -> list[str]:
        """Fix the job before ``can_run`` is asked; returns notes for the user."""
        return []

    def before_start(self, job: Any, log: Path) -> None:
        """On the kernel thread, before anything starts: checks that start nothing."""

    def output(self, job: Any, log: Path | None) -> AbstractContextManager[None] | None:
        """A context for ``job.state()`` that sends what it starts to ``log``, or None (quiet)."""
        return None

    def after_start(self, job: Any, log: Path | None) -> None:
        """On the loop's blocking worker: wait until the workers are really up."""

    def interrupt(self, job: Any) -> None:
        """Ctrl-C during apply, on the kernel thread, before the job is killed: stop what
        blocks the start."""

    def explain(self, job: Any, error: BaseException, log: Path | None) -> str | None:
        """One line for a failure of ``state()`` (Monarch's ``PanicException`` included),
        or None for the generic message."""
        where = f" (log: {os.path.relpath(log)})" if log is not None and log.exists() else ""
        if "resolved to no non-loopback" in str(error):
            return (
                "this machine's hostname resolves only to loopback: call "
                f"{LOOPBACK_FIX} (with an address the hosts can reach) after building the job{where}"
            )
        return None

    # ── re-attach ───────────────────────────────────────────────────────
    def before_connect(self, job: Any) -> None:
        """Before re-attaching to a cached job in this process (not on every read of a cache)."""

    def after_connect(self, job: Any) -> None:
        """A cached job was re-attached in this process."""

    # ── judging a job ───────────────────────────────────────────────────
    def local_processes(self, job: Any) -> dict[str, int]:
        """Host key → PID of the processes on this machine the job needs alive; {} if none."""
        return {}

    def live_workers(self, job: Any, sizes: Sizes) -> Sizes:
        """Mesh name → live worker count where this engine can tell, else None."""
        return {name: None for name in sizes}

    def is_alive(self, job: Any) -> bool:
        """Whether the job's allocation still answers and its local processes live.

        A zombie passes Monarch's own kill(pid, 0) check (a container's init may not
        reap them): the local processes are checked in /proc first."""
        if _introspect.running_job(job) is None:
            return False
        if not all(_procfs.alive(pid) for pid in self.local_processes(job).values()):
            return False
        return _introspect.is_running(job)


class OtherEngine(Engine):
    """Any other JobTrait (Monarch's own SlurmJob, KubernetesJob, …): nothing known about
    its workers here; every step is Monarch's own."""

    workers_are_local = False

    def claims(self, job: Any) -> bool:
        return True
