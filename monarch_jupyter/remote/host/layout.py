"""Where runs live on a host, and their folder and file names. Standard library only.

Per user and host (:func:`runs_root`)::

    $TMPDIR/monarch_jupyter-runs-<uid>/            0700, or $MONARCH_JUPYTER_RUNS_DIR; if another
                                                   user holds that name, ~/.cache/monarch_jupyter/runs
        <run_id>/<key>.<rank>/                     one folder per rank (mesh name, flat rank)
            out, err      what the command printed, written by the command itself
            meta.json     command, target, started, pid (= process group), leader start time, marker
            status        "<rc> <end time>", written by a bash wrapper when the command ends,
                          even with no actor left (or by the actor that reaped it); no status and
                          no leader: killed (SIGKILL) or lost
            escaped       the pids the leader (a child subreaper) had as children when the
                          command ended: its escapees, written before the status
            script.sh, script.py   the command, when too long to pass inline
        <run_id>/stopped_by                        who stopped the run, when someone did (one line)
        .spare.<pid>.<n>/                          the next run's rank folder, made ahead by its actor
        .spare.<pid>.<n>.run/                      … and an empty folder to be that run's folder
        .free.<random>/                            a pruned rank folder, emptied, to be a spare again
        .freerun.<random>/                         a pruned run's folder, emptied, likewise

Every process of a run carries ``MONARCH_JUPYTER_RUN=<run_id>`` (:data:`MARKER`) in its
environment. This layout is read by runs started before an upgrade: names never change.
Importable without Monarch (the Jupyter server extension reads it).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

from ...system.files import read_small
from ..wire.protocol import ERR, OUT

MARKER = "MONARCH_JUPYTER_RUN"
META = "meta.json"
STATUS = "status"
STOPPED_BY = "stopped_by"  # in a run's folder: who stopped it (e.g. "%job kill in kernel pid 42")
ESCAPED = "escaped"  # the pids the leader still had as children when its command ended
RANK_FILES = (OUT, ERR, STATUS, META)  # what a rank folder made ahead holds (empty)
SPARE = ".spare."  # a rank folder made ahead: .spare.<pid of the actor>.<n>
FREE = ".free."  # a pruned rank folder, emptied, waiting to be the next spare: .free.<random>
FREE_RUN = ".freerun."  # a pruned run's folder, emptied, waiting to be the next spare's run folder
RUNS_DIR_ENV = "MONARCH_JUPYTER_RUNS_DIR"


def _default_path() -> Path:
    return Path(tempfile.gettempdir()) / f"monarch_jupyter-runs-{os.getuid()}"


def _fallback_path() -> Path:
    """Where runs go when someone else took the default name in the shared temporary folder."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "monarch_jupyter" / "runs"


def _private(info: os.stat_result) -> bool:
    """A real folder of ours that nobody else can enter (mode 0700 or stricter)."""
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def runs_path() -> Path:
    """Where this user's runs folder is on this host (not created): ``$MONARCH_JUPYTER_RUNS_DIR``,
    else ``$TMPDIR/monarch_jupyter-runs-<uid>`` unless something not ours and private holds that
    name (another user can make it first, or a link), then ``~/.cache/monarch_jupyter/runs``.
    Every process of the user on the host decides alike, so they all find the same runs."""
    custom = os.environ.get(RUNS_DIR_ENV)
    if custom:
        return Path(custom)
    default = _default_path()
    try:
        info = os.lstat(default)
    except FileNotFoundError:
        return default
    except OSError:
        return _fallback_path()
    ours = stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
    return default if ours else _fallback_path()  # ours but open to others: refused, with its fix


def runs_root() -> Path:
    """This user's runs folder on this host (created 0700; refused unless ours and private).
    Checked on every call: one or two lstats when it is there."""
    for _ in range(2):  # the default name taken between our look and our mkdir: the fallback
        root = runs_path()
        fallback = root == _fallback_path()
        try:
            info = os.lstat(root)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                if fallback:
                    root.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                root.mkdir(mode=0o700, parents=RUNS_DIR_ENV in os.environ)
            info = os.lstat(root)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o022:
            with contextlib.suppress(OSError):  # ours, readable by others: tightened, as .monarch/
                if info.st_mode & 0o077:
                    os.chmod(root, 0o700)
                    info = os.lstat(root)
        if _private(info):
            return root
        if RUNS_DIR_ENV in os.environ or fallback:
            break
    raise RuntimeError(
        f"{root} is not a folder of ours that only we can use (a link, another user's, or "
        f"group/others may enter it): remove it, fix it (chmod 700), or set {RUNS_DIR_ENV} "
        "to a private folder of yours"
    )


def rank_name(key: object, rank: object) -> str:
    """A rank's folder name in its run's folder: ``<mesh name>.<flat rank>``."""
    return f"{key}.{rank}"


def check_run_id(run_id: str) -> str:
    """``run_id`` if it is a plain folder name, else ValueError."""
    if not run_id or "/" in run_id or run_id.startswith(".") or "\0" in run_id:
        raise ValueError(f"bad run id {run_id!r}")
    return run_id


def rank_dir(run_id: str, key: str, rank: int, root: Path | None = None) -> Path:
    return (root or runs_root()) / check_run_id(run_id) / rank_name(key, rank)


def read_json(path: Path, limit: int = 1 << 20) -> dict[str, Any] | None:
    """A small JSON object from a file, or None (missing, not a regular file, too big, corrupt): never blocks."""
    raw = read_small(path, limit)
    try:
        data = json.loads(raw or b"null")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def read_status(folder: Path) -> tuple[int, float] | None:
    """``(returncode, ended)`` from the status file, or None while there is none (empty, torn)."""
    try:  # never waits on a FIFO, never follows a link
        words = (read_small(folder / STATUS, 4096) or b"").split()
        return int(words[0]), float(words[1]) if len(words) > 1 else 0.0
    except (OSError, ValueError, IndexError):
        return None


def write_status(folder: Path, returncode: int, ended: float | None = None) -> None:
    """The status the wrapper would have written (used by the actor that reaped a killed leader)."""
    if read_status(folder) is None:
        with contextlib.suppress(OSError):  # a FIFO or a link there is left alone, never waited on
            fd = os.open(
                folder / STATUS,
                os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                0o600,
            )
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    os.ftruncate(fd, 0)
                    os.write(fd, f"{returncode} {ended or time.time()}\n".encode())
            finally:
                os.close(fd)


def write_meta(folder: Path, meta: dict[str, Any]) -> None:
    """One write of a fresh file (readers take a torn one as absent): cheaper than a rename."""
    fd = os.open(folder / META, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, json.dumps(meta).encode())
    finally:
        os.close(fd)


def write_stopped_by(run_id: str, by: str, root: Path | None = None) -> None:
    """Record in the run's folder who stopped it (best effort: the stop goes on without it)."""
    with contextlib.suppress(OSError, ValueError):
        path = (root or runs_root()) / check_run_id(run_id) / STOPPED_BY
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(by.replace("\n", " ")[:200] + "\n")


def read_stopped_by(run_id: str, root: Path | None = None) -> str | None:
    """Who stopped the run (:func:`write_stopped_by`), or None."""
    try:
        raw = read_small((root or runs_path()) / check_run_id(run_id) / STOPPED_BY, 4096)
    except ValueError:
        return None
    return raw.decode("utf-8", "replace").strip() or None if raw else None
