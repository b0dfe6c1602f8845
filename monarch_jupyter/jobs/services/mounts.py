"""Mounts (Monarch's ``remote_mount`` / ``gather_mount``) as a notebook uses them.

- :func:`configure` puts ``--mount`` / ``--gather`` on a ``--local`` job; :func:`spec_mounts`
  says them back for a job the user configured (None: a spec cannot say them);
- :func:`fuse_missing` is the one line saying what to install where FUSE is missing, checked
  before a job with mounts starts on this machine; :func:`explain` turns Monarch's mount failure
  (a traceback from the sidecar) into one line;
- :func:`lines` is what ``%job`` shows; :func:`refresh` re-syncs the workers with the sources.

The mounts live in the job sidecar (its own session): they outlive a kernel restart like the
workers, and Monarch's ``job.kill()`` unmounts them before it stops the sidecar.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from typing import Any

from ...errors import MonarchJupyterError, SpecError
from ...runtime import introspect as _introspect
from ...system import files as _files
from ..specs.mounts import GATHER, MOUNT, SUBDIR, Mount, check_local, local_target, mounts_root

FUSE_DEVICE = "/dev/fuse"
FUSERMOUNT = "fusermount3"


def fuse_missing() -> str | None:
    """Why FUSE mounts cannot work on this machine (one line saying what to do), or None."""
    if not os.path.exists(FUSE_DEVICE):
        return (
            f"mounts need FUSE, and {FUSE_DEVICE} is missing: load the fuse module (modprobe fuse), "
            "or give the container the device (docker run --device /dev/fuse --cap-add SYS_ADMIN)"
        )
    if shutil.which(FUSERMOUNT) is None:
        return f"mounts need FUSE's {FUSERMOUNT}, not found on PATH: install it (Debian/Ubuntu: apt-get install fuse3)"
    return None


def check_fuse() -> None:
    """SpecError with :func:`fuse_missing`'s line when FUSE is missing here."""
    missing = fuse_missing()
    if missing is not None:
        raise SpecError(missing)


def start_refusal(job: Any, workers_local: bool) -> str | None:
    """Why ``job``'s mounts cannot open (FUSE missing on this machine, where its workers or its
    gather mounts are), or None."""
    entries = _introspect.mount_entries(job)
    if (workers_local and entries) or any(entry[0] == GATHER for entry in entries):
        return fuse_missing()
    return None


def configure(job: Any, mounts: tuple[Mount, ...]) -> Any:
    """Declare ``mounts`` on ``job`` (a ``--local`` ProcessJob; its workers run on this machine,
    so FUSE is checked here first); returns ``job``."""
    if not mounts:
        return job
    check_fuse()
    if any(mount.kind == MOUNT and mount.target is None for mount in mounts):
        private_root()
    for mount in mounts:
        if mount.kind == MOUNT:
            if not os.path.isdir(mount.source):
                raise SpecError(f"{mount.describe()}: {mount.source} is not a folder")
            # python_exe=None: the workers keep their Python (Monarch's default wants a .venv in SRC)
            job.remote_mount(mount.source, mntpoint=local_target(mount), python_exe=None)
        else:
            assert mount.target is not None  # parse() gives every gather its LOCAL
            job.gather_mount(mount.source, mount.target)
    return job


def private_root() -> str:
    """:func:`~.specs.mounts.mounts_root`, made 0700; SpecError unless its parent is a real folder of
    this user that others cannot write (another user could make it first in the shared temp folder)."""
    root = mounts_root()
    parent = os.path.dirname(root)
    try:
        _files.own_private_dir(parent, refuse_shared=True)
    except _files.NotYoursError:
        raise SpecError(
            f"{parent} is not a private folder of yours (a link, or another user's): remove it, "
            "or give each --mount its DST (--mount SRC:DST)"
        ) from None
    with contextlib.suppress(FileExistsError):
        os.mkdir(root, 0o700)
    return root


def spec_mounts(job: Any) -> tuple[Mount, ...] | None:
    """The ``--mount`` / ``--gather`` flags that re-create ``job``'s mounts, or None when its
    mounts are ones they cannot say (some meshes only, extra options, relative paths)."""
    found: list[Mount] = []
    for kind, source, target, meshes, plain in _introspect.mount_entries(job):
        if meshes is not None or not plain:
            return None
        paths = (source, target or source)
        if not all(isinstance(p, str) and p.startswith("/") and ":" not in p for p in paths):
            return None
        if kind == MOUNT:
            derived = Mount(MOUNT, source)
            found.append(
                derived
                if local_target(derived) == (target or source)
                else Mount(MOUNT, source, target or source)
            )
        elif kind == GATHER:
            found.append(Mount(GATHER, source, target))
    try:
        check_local(tuple(found))  # e.g. Monarch's default mount point, the source itself
    except SpecError:
        return None
    return tuple(found)


def lines(job: Any) -> list[str]:
    """What ``%job`` shows of ``job``'s mounts, one line each."""
    out = []
    for kind, source, target, meshes, _plain in _introspect.mount_entries(job):
        where = f" (meshes {', '.join(meshes)})" if meshes is not None else ""
        if kind == MOUNT:
            out.append(f"{source} → workers' {target or source}{where}")
        else:
            out.append(f"workers' {source} → {target} (read-only){where}")
    return out


def explain(error: BaseException) -> str | None:
    """One line for a mount that failed to open (Monarch raises the sidecar's whole traceback), else None."""
    text = str(error)
    if "job mounts" not in text and FUSERMOUNT not in text:
        return None
    if FUSERMOUNT in text and "find" in text:
        return f"the job's mounts failed: {FUSERMOUNT} was not found where they mount (install fuse3 there)"
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), text)
    return f"the job's mounts failed: {last}"


def fuse_points() -> list[str]:
    """The FUSE mount points of this machine (this mount namespace), from ``/proc/mounts``."""
    try:
        with open("/proc/mounts", encoding="utf-8", errors="replace") as mounts:
            text = mounts.read(4 << 20)  # procfs: never blocks; bounded all the same
    except OSError:
        return []
    points = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2].startswith("fuse"):
            points.append(fields[1].replace("\\040", " "))
    return points


def here(job: Any, workers_local: bool) -> list[str]:
    """The mount points of ``job``'s mounts that are mounted on this machine now: its gather
    mounts, and its remote mounts too when its workers are local (``$SUBDIR``: any one folder)."""
    templates: list[tuple[str, str]] = []  # (head, tail): head + one folder name + tail
    exact: set[str] = set()
    for kind, source, target, _meshes, _plain in _introspect.mount_entries(job):
        if kind == GATHER and target:
            exact.add(target)
            templates.append((target.rstrip("/") + "/", ""))  # one folder per mesh, when many
        elif kind == MOUNT and workers_local:
            head, sep, tail = (target or source).partition(SUBDIR)
            if sep:
                templates.append((head, tail))
            else:
                exact.add(target or source)
    return [p for p in fuse_points() if p in exact or any(_fills(p, h, t) for h, t in templates)]


def _fills(point: str, head: str, tail: str) -> bool:
    """Whether ``point`` is ``head`` + one folder name + ``tail``."""
    if not (point.startswith(head) and point.endswith(tail)) or len(point) <= len(head) + len(tail):
        return False
    middle = point[len(head) : len(point) - len(tail)]
    return "/" not in middle


def unmount_lazily(points: list[str]) -> list[str]:
    """``fusermount3 -u -z`` each point (detached now, freed once nothing uses it); those it unmounted."""
    done = []
    for point in points:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            if (
                subprocess.run([FUSERMOUNT, "-u", "-z", point], capture_output=True, timeout=30).returncode
                == 0
            ):
                done.append(point)
    return done


def refresh(job: Any, state: Any) -> int:
    """Re-sync ``job``'s remote mounts with their sources; how many there are. Raises
    MonarchJupyterError (one line) when it has none or the sidecar refused."""
    count = sum(1 for entry in _introspect.mount_entries(job) if entry[0] == MOUNT)
    if not count:
        raise MonarchJupyterError(
            "the job has no --mount to refresh (gather mounts follow their sources by themselves)"
        )
    try:
        _introspect.refresh_mounts(job, state)
    except Exception as error:
        raise MonarchJupyterError(explain(error) or f"{type(error).__name__}: {error}") from None
    return count


__all__ = ["SUBDIR", "check_fuse", "configure", "explain", "fuse_missing", "lines", "refresh", "spec_mounts"]
