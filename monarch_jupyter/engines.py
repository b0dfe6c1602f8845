"""Engine-specific steps around ``%job apply`` and re-attach, in one place.

``JobSession`` calls these hooks for every job; each does nothing for engines it
does not know (``ProcessJob``), so the session stays engine-agnostic:

- :func:`prepare` — fix the spec before ``can_run`` is asked (SSH: add ``-tt``);
- :func:`before_start` — checks that start nothing (SSH: transport, preflight);
- :func:`after_start` — wait until the workers are really up (SSH);
- :func:`explain` — one line for an exception from ``state()`` (incl. Monarch's
  ``PanicException``, a BaseException);
- :func:`before_connect` — before re-attaching to a cached job (SSH: its transport);
- :func:`after_connect` — after re-attaching (SSH: note the addresses used).

Progress lines go to stdout, i.e. the apply cell.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import _introspect, ssh


def progress(text: str) -> None:
    print(f"monarch_jupyter: {text}", flush=True)


def apply_log(context_dir: Path) -> Path:
    """``.monarch/<context>/apply-<UTC stamp>.log``: the apply's and its workers' full text."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S-%f")
    return context_dir / f"apply-{stamp}.log"


@contextlib.contextmanager
def _fds_to(log: Path) -> Iterator[None]:
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
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(target)


def output(job: Any, log: Path | None) -> Any:
    """A context for ``job.state()`` that sends what it starts to ``log``, or None.

    SSHJob's ssh clients inherit fds 1 and 2 and keep them for the job's life: the remote
    workers' output would land in whichever cell runs next. The log is their file instead.
    """
    if log is not None and ssh.is_ssh_job(job):
        return _fds_to(log)
    return None


def prepare(job: Any) -> list[str]:
    if ssh.is_ssh_job(job):
        return ssh.prepare(job)
    return []


def _is_our_slurm(job: Any) -> bool:
    return any(cls.__module__ == "monarch_jupyter.slurm" for cls in type(job).__mro__)


def before_start(job: Any, log: Path) -> None:
    _cancel.clear()
    if _is_our_slurm(job):
        from . import slurm

        slurm.progress = progress
    if ssh.is_ssh_job(job):
        log.parent.mkdir(parents=True, exist_ok=True)
        ssh.check_addresses(job)
        ssh.choose_transport(job)
        ssh.preflight(job, log, progress=progress)


_cancel = threading.Event()  # set by interrupt(): one apply at a time per kernel


def after_start(job: Any, log: Path | None) -> None:
    """On the loop's blocking worker: wait until the workers are up (SSH); interrupt() stops it."""
    if ssh.is_ssh_job(job) and log is not None:
        ssh.remember_addresses(job)  # even if not ready: this process has dialled them
        ssh.wait_ready(job, log, progress=progress, cancelled=_cancel)


def after_connect(job: Any) -> None:
    """A cached job was re-attached in this process."""
    running = _introspect.running_job(job) or job
    if ssh.is_ssh_job(running):
        ssh.remember_addresses(running)


def interrupt(job: Any) -> None:
    """Ctrl-C during apply, on the kernel thread, before the job is killed: stop what
    blocks the start (a pending Slurm allocation is scancel-ed at once)."""
    _cancel.set()
    if _is_our_slurm(job):
        job.cancel()


def explain(job: Any, error: BaseException, log: Path | None) -> str | None:
    """One line for a failure of ``state()``, or None for the generic message."""
    text = str(error)
    where = f" (log: {os.path.relpath(log)})" if log is not None and log.exists() else ""
    if "resolved to no non-loopback" in text:
        return (
            "this machine's hostname resolves only to loopback: call "
            f"{ssh.LOOPBACK_FIX} (with an address the hosts can reach) after building the job{where}"
        )
    return None


def before_connect(job: Any) -> None:
    """Before re-attaching to a cached job (not on every read of a cache: the transport is
    process-wide)."""
    ssh.restore(_introspect.running_job(job) or job)


def send_by_value(module: Any) -> None:
    """Pickle ``module``'s code by value, and that of every module of ours it uses, so
    workers need only torchmonarch.

    Monarch pickles actor classes with cloudpickle, by reference when their module is
    importable here; a worker without monarch_jupyter could not import it. These modules
    must import nothing but the standard library, monarch and each other.
    """
    import sys
    import types

    import cloudpickle

    package = __name__.split(".")[0] + "."
    todo, seen = [module], set()
    while todo:
        current = todo.pop()
        if current.__name__ in seen:
            continue
        seen.add(current.__name__)
        cloudpickle.register_pickle_by_value(current)
        for value in vars(current).values():
            if isinstance(value, types.ModuleType):
                name = value.__name__
            else:
                name = getattr(value, "__module__", None) or ""
            if name.startswith(package) and name not in seen and name in sys.modules:
                todo.append(sys.modules[name])
