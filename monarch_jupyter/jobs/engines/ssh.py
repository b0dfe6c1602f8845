"""Monarch's ``SSHJob`` from a notebook: the checks and fixes it needs around apply.

``SSHJob`` (``monarch._src.job.job``, not exported) starts one
``ssh HOST -n "<python> -c run_worker_loop_forever(...)"`` client per host and
returns from ``state()`` before any worker answered, so a dead ssh client only
shows up ~60 s later in some other cell. :class:`SSHEngine`, around the start:

- ``prepare`` adds ``-tt`` to the ssh arguments (without a tty, killing the ssh
  client leaves the remote worker running);
- ``before_start`` refuses a worker address this process used before, picks a
  transport the client can bind, and runs the preflight (:mod:`.ssh_checks`);
- ``after_start`` watches the ssh clients until every worker listens, turning a
  dying client into one line naming the host and the log file;
- ``before_connect`` re-enables the job's transport after unpickling (SlurmJob
  has a ``__setstate__`` for that; SSHJob has none).

The job's fields are read through :mod:`...runtime.introspect`; Monarch has no public accessor.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ...runtime import introspect as _introspect
from ...system import procfs as _procfs
from ...system.files import private_dir
from . import ssh_checks, transport
from .base import Engine, Sizes, fds_to, progress
from .ssh_checks import ApplyFailed

READY_TIMEOUT = 60.0


def hosts(job: Any) -> dict[str, list[str]]:
    """Mesh name → host names of an SSHJob (``add_mesh`` order)."""
    meshes = _introspect.declared_meshes(job) or {}
    return {str(name): list(value) for name, value in meshes.items() if isinstance(value, (list, tuple))}


def all_hosts(job: Any) -> list[str]:
    seen: list[str] = []
    for names in hosts(job).values():
        seen += [h for h in names if h not in seen]
    return seen


def add_tty(job: Any) -> list[str]:
    """Add ``-tt`` to the job's ssh arguments unless it has a tty already; returns notes."""
    args = _introspect.ssh_args(job)
    if "-tt" in args or "-t" in args:
        return []
    _introspect.set_ssh_args(job, ("-tt", *args))
    return [
        "added -tt to ssh_args: without a tty, %job kill would stop the ssh clients but not the remote workers"
    ]


def choose_transport(job: Any) -> None:
    """Make the client bindable when this machine's hostname resolves only to loopback.

    When every host of the job is a loopback address the client can listen on
    127.0.0.1, and we configure that; otherwise the user must name an address the
    hosts can reach: ApplyFailed.
    """
    if _introspect.transport(job) != "tcp" or not transport.hostname_is_loopback_only():
        return
    if all(transport.is_loopback_host(h) for h in all_hosts(job)):
        transport.listen_on_loopback()
        return
    raise ApplyFailed(
        f"this machine's hostname {socket.gethostname()!r} resolves only to loopback, so remote hosts "
        f"could not reach this kernel: add {transport.LOOPBACK_FIX.replace('127.0.0.1', 'ADDRESS')} with an "
        "address the hosts can reach, after building the job (or fix /etc/hosts)"
    )


def restore(job: Any) -> None:
    """After unpickling: re-enable the job's transport (SSHJob has no ``__setstate__`` for it)."""
    _introspect.enable_transport(_introspect.transport(job))
    # On ApplyFailed, re-attaching then fails with Monarch's own message; apply explains it.
    with contextlib.suppress(ApplyFailed):
        choose_transport(job)


def live_per_mesh(job: Any) -> dict[str, int]:
    """Mesh → hosts whose ssh client (and with ``-tt`` its worker) is alive."""
    pids = _introspect.worker_pids(job)
    return {
        name: sum(1 for h in names if h in pids and _procfs.alive(pids[h]))
        for name, names in hosts(job).items()
    }


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_ready(
    job: Any,
    log: Path,
    timeout: float = READY_TIMEOUT,
    progress: Callable[[str], None] | None = None,
    cancelled: threading.Event | None = None,
) -> None:
    """Wait until each host's worker port accepts connections while its ssh client lives."""
    table = _introspect.worker_pids(job)  # host → local ssh client PID
    port = _introspect.worker_port(job)
    waiting = dict(table)
    deadline = time.monotonic() + timeout
    up: list[str] = []
    while waiting:
        if cancelled is not None and cancelled.is_set():
            raise ApplyFailed("cancelled while the workers started")
        for host, pid in list(waiting.items()):
            if not _procfs.alive(pid):
                raise ApplyFailed(
                    f"the ssh client for {host} exited before its worker came up: "
                    f"{ssh_checks.summary(ssh_checks.tail(log))} (log: {ssh_checks.shown(log)})"
                )
            if _listening(host, port):
                up.append(host)
                del waiting[host]
                if progress is not None:
                    progress(f"worker up on {host} ({len(up)}/{len(table)})")
        if not waiting:
            break
        if time.monotonic() > deadline:
            raise ApplyFailed(
                f"the workers on {', '.join(waiting)} did not listen on port {port} within {timeout:g} s "
                f"(log: {ssh_checks.shown(log)})"
            )
        time.sleep(ssh_checks.POLL * 2)


class SSHEngine(Engine):
    """SSHJob. Owns what outlives one call: the worker addresses this process dialled,
    and the cancel event of the apply in progress (one at a time per kernel)."""

    workers_are_local = False  # worker_pids are the ssh clients; the workers are on the hosts

    def __init__(self) -> None:
        # Monarch 0.7 cannot connect one client to a new worker at an address it already
        # used (host:port): the connection fails after ~60 s ("config push failed").
        self.used: set[tuple[str, int]] = set()
        self.cancel = threading.Event()

    def claims(self, job: Any) -> bool:
        return any(cls.__name__ == "SSHJob" for cls in type(job).__mro__)

    def reach(self, job: Any) -> str:
        return (
            f"anyone who can reach TCP port {_introspect.worker_port(job)} on its hosts "
            "(Monarch 0.7 checks no peer): keep it behind a firewall"
        )

    # ── apply ───────────────────────────────────────────────────────────
    def prepare(self, job: Any) -> list[str]:
        return add_tty(job)

    def before_start(self, job: Any, log: Path) -> None:
        self.cancel.clear()
        private_dir(log.parent)
        self.check_addresses(job)
        choose_transport(job)
        ssh_checks.preflight(
            all_hosts(job), _introspect.ssh_args(job), _introspect.python_exe(job), log, progress=progress
        )

    def output(self, job: Any, log: Path | None) -> AbstractContextManager[None] | None:
        # The ssh clients inherit fds 1 and 2 and keep them for the job's life: the remote
        # workers' output would land in whichever cell runs next. The log is their file instead.
        return fds_to(log) if log is not None else None

    def after_start(self, job: Any, log: Path | None) -> None:
        if log is not None:
            self.remember_addresses(job)  # even if not ready: this process has dialled them
            wait_ready(job, log, progress=progress, cancelled=self.cancel)

    def interrupt(self, job: Any) -> None:
        self.cancel.set()

    # ── re-attach ───────────────────────────────────────────────────────
    def before_connect(self, job: Any) -> None:
        restore(_introspect.running_job(job) or job)

    def after_connect(self, job: Any) -> None:
        self.remember_addresses(_introspect.running_job(job) or job)

    # ── judging ─────────────────────────────────────────────────────────
    def local_processes(self, job: Any) -> dict[str, int]:
        return _introspect.worker_pids(job)  # with -tt a worker lives exactly as long as its client

    def live_workers(self, job: Any, sizes: Sizes) -> Sizes:
        if not _introspect.worker_pids(job):
            return {name: None for name in sizes}
        live = live_per_mesh(_introspect.running_job(job) or job)
        return {name: live.get(name) for name in sizes}

    # ── worker addresses this process has connected to ──────────────────
    def remember_addresses(self, job: Any) -> None:
        """Note the job's worker addresses as used by this process (after start or re-attach)."""
        port = _introspect.worker_port(job)
        self.used.update((host, port) for host in all_hosts(job))

    def check_addresses(self, job: Any) -> None:
        """ApplyFailed at once, instead of a failure ~60 s later, for a host:port used before here."""
        port = _introspect.worker_port(job)
        reused = [host for host in all_hosts(job) if (host, port) in self.used]
        if reused:
            raise ApplyFailed(
                f"{reused[0]}:{port} already served an earlier job in this kernel and Monarch cannot connect "
                "to a new worker there from the same process: restart the kernel (the job cache survives it), "
                "or use another port (SSHJob monarch_port=…, or --port)"
            )
