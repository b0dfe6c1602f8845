"""A local job as its plain files record it, read and killed without unpickling it.

Unpickling a cached job imports Monarch (~0.4 s), which ``%load_ext`` leaves to a background
attach (``_warmup``). A job whose workers are processes of this machine is known without it:
the context's ``status.json`` (written by the kernel side) names its workers for this very
pickle, the live record (``_live``, outside the project) holds each one's start time, and
``/proc`` says whether they still run. :func:`status_from_files` is ``%load_ext``'s line from
them; :func:`killable` and :func:`kill` are ``%job kill`` of such a job right after a restart:
only when the cache is signed by this user's kernels, both records agree on the same live
workers of this user, and the job runs no sidecar or service (those take Monarch's own kill).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..system import files as _files
from ..system import live as _live
from ..system import orphans as _orphans
from ..system import procfs as _procfs
from . import cache
from . import signing as _signing
from .contexts import STATUS_FILE, Layout
from .status import RUNNING, WORKERS_DEAD, JobStatus, MeshStatus

_MAX_STATUS = 1 << 20
_POLL = 0.005
# Monarch's ProcessJob gives each worker the address ipc://<its folder of sockets>/<mesh>_<i>.
_SOCKETS = re.compile(rb"ipc://(/[^'\"\s\0]*/monarch_process_job_[A-Za-z0-9_]+)/")


def status_from_files(layout: Layout, context: str, info: os.stat_result) -> JobStatus | None:
    """The job described by ``status.json`` when it is about this very pickle (``info``: its
    stat), with the worker PIDs checked in /proc; None when the files cannot vouch for it."""
    data = read_json(layout.context_dir(context) / STATUS_FILE)
    if not isinstance(data, dict) or data.get("state") not in (RUNNING, WORKERS_DEAD):
        return None
    if data.get("applied_at") != info.st_mtime or not data.get("apply_id"):
        return None  # written about another pickle (re-applied since, e.g. by the CLI)
    pids = data.get("worker_pids")
    # A status.json written before ``workers_local`` existed lacks it: the PID keys below decide.
    if data.get("workers_local", True) is not True or not isinstance(pids, dict) or not pids:
        return None  # no workers of this machine (the engine said so): only connecting can tell
    try:
        meshes = [MeshStatus(str(m["name"]), m.get("hosts"), None) for m in data.get("meshes", [])]
        keys = {f"{m.name}_{i}" for m in meshes for i in range(m.hosts or 0)}
        if set(pids) - keys:
            return None  # PIDs keyed by host (SSHJob's ssh clients), not local workers: connecting tells
        alive = {key: _is_worker(int(pid)) for key, pid in pids.items()}
        for mesh in meshes:
            mesh.live_workers = sum(1 for i in range(mesh.hosts or 0) if alive.get(f"{mesh.name}_{i}"))
        return JobStatus(
            context=context,
            state=RUNNING if all(alive.values()) else WORKERS_DEAD,
            job_class=str(data.get("job_class") or "job"),
            apply_id=str(data["apply_id"]),
            spec=data.get("spec"),
            meshes=meshes,
            services=[str(s) for s in data.get("services") or []],
            worker_pids={key: int(pid) for key, pid in pids.items()},
            workers_local=True,
            applied_at=info.st_mtime,
        )
    except (TypeError, ValueError, KeyError, AttributeError):
        return None


def _is_worker(pid: int) -> bool:
    """Alive, and still a Python process (a recycled PID rarely is one)."""
    if not _procfs.alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as stream:
            return b"python" in stream.read(4096)
    except OSError:
        return True  # alive but unreadable: /proc already said yes


def read_json(path: os.PathLike[str]) -> Any:
    """Parse a small regular file; None for anything else (FIFOs and huge files are never read)."""
    data = _files.read_small(path, _MAX_STATUS)
    try:
        return None if data is None else json.loads(data)
    except ValueError:
        return None


@dataclass(frozen=True)
class Killable:
    """A local job whose workers can be stopped from its records."""

    status: JobStatus  # as status.json and /proc describe it
    workers: dict[int, int]  # pid -> start ticks: alive, this user's, named by both records
    sockets: Path | None  # Monarch's folder of the workers' sockets, removed after them
    record: _live.LiveRecord


def killable(layout: Layout, state_path: Path, context: str) -> Killable | None:
    """The context's job when its records vouch for every worker (see the module); else None,
    and the ordinary path (unpickling, Monarch's kill) decides, refusing what it refuses."""
    try:
        path = Path(os.path.realpath(state_path))
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode) or not 0 < info.st_size <= _files.PICKLE_BYTES:
            return None
        cache.check_safe(path)
        if _signing.check(path, _files.read_bytes(path, _files.PICKLE_BYTES, what="job cache")) is not None:
            return None  # not signed by our kernels: the ordinary path says so, unpickling nothing
    except Exception:  # CacheError, UnsafeFileError, OSError: the ordinary path reports it
        return None
    status = status_from_files(layout, context, info)
    if status is None or status.state != RUNNING or status.services:
        return None  # dead workers, or a sidecar / admin to stop: Monarch's kill
    if os.path.lexists(sidecar_lock(str(status.apply_id))):
        return None  # a sidecar was started for it (mounts): only Monarch can close it
    record = _live.find(str(layout.root), context)
    if record is None or record.apply_id != status.apply_id:
        return None
    pids = set(status.worker_pids.values())
    if set(record.workers) != pids or record.alive() != sorted(pids):
        return None
    workers = {pid: ticks for pid, ticks in record.workers.items() if ticks is not None}
    return Killable(status, workers, _sockets(pids), record)


def sidecar_lock(apply_id: str) -> str:
    """Monarch's ``job_sidecar_lock_path(apply_id)``, written out: importing it imports Monarch
    (test_introspect_pins checks the two agree)."""
    return f"/tmp/monarch_job_sidecar_{apply_id}.lock"


def _sockets(pids: set[int]) -> Path | None:
    """The one folder of sockets every worker's command line names, if it is a folder of ours."""
    found = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as stream:
                match = _SOCKETS.search(stream.read(65536))
        except OSError:
            return None
        if match is None:
            return None
        found.add(os.fsdecode(match.group(1)))
    if len(found) != 1:
        return None
    folder = Path(found.pop())
    try:
        info = os.lstat(folder)
    except OSError:
        return None
    return folder if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() else None


def kill(found: Killable) -> list[int]:
    """Stop the workers' sessions as Monarch's ProcessJob kill does (SIGTERM, then SIGKILL),
    remove their folder of sockets and the live record; returns the workers' PIDs."""
    leaders = {pid for pid in found.workers if _orphans.leads_session(pid) and _ours(found, pid)}
    _orphans.kill_sessions(leaders, poll=_POLL)  # a command someone waits on: look often
    for pid in found.workers:  # a worker that does not lead its session: itself
        if _ours(found, pid):
            _procfs.kill(pid, signal.SIGKILL)
    if found.sockets is not None:
        with contextlib.suppress(OSError):
            shutil.rmtree(found.sockets)
    _live.forget(found.record.folder, found.record.context)
    return sorted(found.workers)


def _ours(found: Killable, pid: int) -> bool:
    return pid in found.record.alive()
