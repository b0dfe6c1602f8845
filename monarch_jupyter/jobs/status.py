"""What a context's job looks like now, as plain data, and who is told about it.

``describe`` builds a :class:`JobStatus` from a job (and its JobState when this
kernel is connected); ``StatusBoard`` hands each published status to listeners
(the ``%job`` widget) and writes ``status.json`` for the JupyterLab sidebar,
which never unpickles. No IPython, no threads.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..runtime import introspect as _introspect
from ..system import procfs as _procfs
from ..text import timefmt as _timefmt
from . import services
from .contexts import Layout
from .engines import engine_for
from .services import mounts

RUNNING = "running"
NOT_RUNNING = "not running"
WORKERS_DEAD = "workers dead"
NO_JOB = "no job"

_log = logging.getLogger(__name__)


@dataclass
class MeshStatus:
    name: str
    hosts: int | None
    live_workers: int | None


@dataclass
class JobStatus:
    """Plain-data snapshot of a context's job; views format it, tests compare it."""

    context: str
    state: str
    job_class: str | None = None
    apply_id: str | None = None
    spec: str | None = None
    meshes: list[MeshStatus] = field(default_factory=list)
    urls: dict[str, str | None] = field(default_factory=dict)
    services: list[str] = field(default_factory=list)  # configured: telemetry, admin, mounts
    mounts: list[str] = field(default_factory=list)  # one line per mount (services/mounts.lines)
    worker_pids: dict[str, int] = field(default_factory=dict)
    workers_local: bool = False  # the engine's answer: worker_pids are the workers, on this machine
    applied_at: float | None = None
    cache_path: str | None = None
    attached: bool = False
    note: str | None = None  # e.g. where an unreadable cache was moved
    stopped_workers: dict[str, int] = field(default_factory=dict)  # local workers in state T (SIGSTOP)
    reach: str | None = None  # who can connect to the workers (Engine.reach)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["updated"] = _timefmt.utc_iso(time.time())
        data["applied"] = _timefmt.utc_iso(self.applied_at) if self.applied_at else None
        return data


@dataclass
class ApplyResult:
    """What ``%job apply`` did: the status after it, and whether anything was applied."""

    status: JobStatus
    changed: bool
    replaced_apply_id: str | None = None
    note: str | None = None


def condition(job: Any) -> str:
    """RUNNING, NOT_RUNNING or WORKERS_DEAD for a (cached or connected) job."""
    if _introspect.running_job(job) is None:
        return NOT_RUNNING
    return RUNNING if engine_for(job).is_alive(job) else WORKERS_DEAD


def describe(
    name: str,
    job: Any,
    state: Any,
    *,
    state_path: Path,
    root: Path,
    spec: str | None,
) -> JobStatus:
    """The status of context ``name`` holding ``job`` (None: no job); ``state`` is
    the JobState when this kernel is connected to it, else None."""
    if job is None:
        return JobStatus(context=name, state=NO_JOB, spec=spec)
    host_meshes = _introspect.host_meshes(state) if state is not None else None
    sizes = _introspect.mesh_sizes(job, host_meshes)
    engine = engine_for(job)
    live = engine.live_workers(job, sizes)
    pids = _introspect.worker_pids(job)
    try:
        applied_at: float | None = state_path.stat().st_mtime
    except OSError:  # no cache file (a variable spec not yet saved, or removed by the CLI)
        applied_at = None
    return JobStatus(
        context=name,
        state=condition(job),
        job_class=type(_introspect.running_job(job) or job).__name__,
        apply_id=getattr(job, "apply_id", None),
        spec=spec,
        meshes=[MeshStatus(m, sizes[m], live.get(m)) for m in sizes],
        urls=_introspect.urls(job, state),
        services=list(services.configured(job)),
        mounts=mounts.lines(job),
        worker_pids=pids,
        workers_local=engine.workers_are_local,
        stopped_workers={n: p for n, p in pids.items() if engine.workers_are_local and _procfs.stopped(p)},
        applied_at=applied_at,
        cache_path=os.path.relpath(state_path, root) if state_path.exists() else None,
        attached=state is not None,
        reach="; ".join(filter(None, (engine.reach(job), services.reach(services.configured(job))))),
    )


Listener = Callable[[JobStatus], None]


class StatusBoard:
    """Publishes statuses: to ``status.json`` of the context and to listeners."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    @property
    def listeners(self) -> tuple[Listener, ...]:
        return tuple(self._listeners)

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(status)`` on every publish; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def publish(self, layout: Layout, status: JobStatus) -> None:
        """Write the context's status.json (if the context exists) and tell listeners.

        Neither may break the lifecycle that published: the sidebar's file is a
        convenience (a read-only folder still runs jobs), and a broken view is
        reported in one line and the others are still told.
        """
        try:
            if layout.exists(status.context):
                layout.write_status(status.context, status.to_json())
        except OSError as error:
            _log.warning("monarch_jupyter: could not write status.json for the sidebar: %s", error)
        for listener in list(self._listeners):
            try:
                listener(status)
            except Exception as error:  # a view's bug: say so once, keep the others informed
                _log.warning("monarch_jupyter: a status view failed: %s: %s", type(error).__name__, error)
