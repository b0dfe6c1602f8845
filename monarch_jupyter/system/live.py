"""A second record of each job's live local workers, outside the project folder.

``.monarch/`` can vanish while a job runs (``rm -rf .monarch``, ``git clean -xfd``,
``mv .monarch x``); its workers must not run on unseen. Whenever a kernel holds a
job whose workers are on this machine it keeps one small JSON per (folder,
context) in ``$XDG_CACHE_HOME/monarch_jupyter/live/`` (default ``~/.cache``; 0700,
files 0600): the folder, the context, the apply id and each worker's PID with its
start time in clock ticks. A new kernel in that folder whose cache is gone finds
the record, ``%job`` says the workers still run and ``%job kill`` stops them.
Only processes of this user whose start time still matches are ever signalled,
so a reused PID or a doctored record harms nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from . import files as _files
from . import orphans as _orphans
from . import procfs as _procfs

_MAX_RECORD = 64 << 10


def live_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "monarch_jupyter" / "live"


def _record_path(folder: str, context: str) -> Path:
    key = hashlib.sha256(f"{os.path.realpath(folder)}\0{context}".encode()).hexdigest()[:24]
    return live_dir() / f"{key}.json"


@dataclass(frozen=True)
class LiveRecord:
    folder: str
    context: str
    apply_id: str | None
    workers: dict[int, int | None]  # pid -> start ticks

    def alive(self) -> list[int]:
        """The recorded workers still running as this user, with the start time recorded."""
        return sorted(pid for pid, ticks in self.workers.items() if _ours(pid, ticks))


def _ours(pid: int, ticks: int | None) -> bool:
    try:
        if os.stat(f"/proc/{pid}").st_uid != os.getuid():
            return False
    except OSError:
        return False
    return ticks is not None and _procfs.alive(pid, ticks)


def _ensure_dir() -> Path:
    folder = live_dir()
    try:
        return _files.own_private_dir(folder)
    except _files.NotYoursError as error:
        raise OSError(str(error)) from None


def record(folder: str, context: str, apply_id: str | None, pids: dict[str, int]) -> None:
    """Keep (replace) the record of ``context`` in ``folder``; nothing to keep without workers."""
    workers = {int(pid): _procfs.start_ticks(int(pid)) for pid in pids.values()}
    if not workers:
        forget(folder, context)
        return
    data = {
        "folder": os.path.realpath(folder),
        "context": context,
        "apply_id": apply_id,
        "workers": [[pid, ticks] for pid, ticks in workers.items()],
        "written": time.time(),
    }
    with contextlib.suppress(OSError):  # a convenience: a full or read-only home runs jobs still
        _ensure_dir()
        _files.write_atomic(_record_path(folder, context), json.dumps(data).encode())


def forget(folder: str, context: str) -> None:
    with contextlib.suppress(OSError):
        _record_path(folder, context).unlink()


def find(folder: str, context: str) -> LiveRecord | None:
    """The record of ``context`` in ``folder`` if it is ours and names it; else None."""
    path = _record_path(folder, context)
    try:
        info = os.lstat(path)
        if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
            return None
        data = json.loads(_files.read_bytes(path, _MAX_RECORD, what="live workers record"))
        found = LiveRecord(
            str(data["folder"]),
            str(data["context"]),
            data.get("apply_id"),
            {int(pid): (int(ticks) if ticks is not None else None) for pid, ticks in data["workers"]},
        )
    except (OSError, ValueError, TypeError, KeyError, _files.UnsafeFileError):
        return None
    if found.folder != os.path.realpath(folder) or found.context != context:
        return None
    return found


def stop(found: LiveRecord) -> list[int]:
    """Stop the record's live workers (each leads a session: all of it); returns their PIDs."""
    alive = found.alive()
    _orphans.kill_sessions({pid for pid in alive if _orphans.leads_session(pid)})
    for pid in alive:  # a worker that does not lead its session: itself
        if _ours(pid, found.workers[pid]):
            _procfs.kill(pid, signal.SIGKILL)
    forget(found.folder, found.context)
    return alive


def orphan_note(found: LiveRecord | None) -> str | None:
    """The line ``%job`` adds when a job's cache is gone but its workers run, else None
    (a record whose workers all ended is removed)."""
    alive = found.alive() if found else []
    if found is not None and not alive:
        forget(found.folder, found.context)
    if not alive:
        return None
    shown = ", ".join(map(str, alive[:8])) + (", …" if len(alive) > 8 else "")
    return f"workers of a job whose cache is gone still run (pid {shown}): %job kill stops them"
