"""What a host knows about runs: each rank's state from its folder, the processes carrying a
run's marker, stopping runs, pruning finished ones, and following a run we did not start.

Finished runs beyond ``KEEP_RUNS`` or older than ``KEEP_SECONDS`` are pruned (their rank folders
emptied for reuse: :mod:`.spares`). An idle finished run holds no process and no open fd.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from ...system import procfs as _procfs
from ...system.files import read_small
from ..wire.protocol import ERR, OUT
from .layout import (
    ESCAPED,
    MARKER,
    META,
    SPARE,
    check_run_id,
    read_json,
    read_status,
    read_stopped_by,
    runs_root,
    write_stopped_by,
)
from .spares import Recycler, remove_spares, spare_owner_alive
from .tail import Tail

KEEP_RUNS = 50  # finished runs kept per host (newest)
KEEP_SECONDS = 7 * 86400  # … and none older than this
STATUS_WAIT = 0.5  # after a leader we did not start exits, how long its status may take to appear


def leader_pid(meta: dict[str, Any] | None) -> int | None:
    """The process a rank's run lives in: its wrapper, or for a session cell the namespace's."""
    if not meta:
        return None
    pid = meta.get("pid") or meta.get("session_pid")
    return int(pid) if pid else None


def leader_alive(meta: dict[str, Any] | None) -> bool:
    """Whether the run's leader (the wrapper, or a session cell's namespace process: the
    status file says when the cell ended) is still the live process it was (not a zombie)."""
    pid = leader_pid(meta)
    if pid is None:
        return False
    assert meta is not None
    ticks = meta.get("start_ticks") if meta.get("pid") else meta.get("session_ticks")
    return _procfs.alive(pid, ticks)


ESCAPE_SLACK = 1.0  # an escapee started at most this long before its run's recorded start


def marked_pids(run_ids: set[str] | None = None, root: Path | None = None) -> dict[str, list[int]]:
    """This user's live processes of one of ``run_ids`` (any run: None), by run id: those carrying
    its marker, and those that shed it: below a live leader (a child subreaper), an escapee its
    leader recorded (:data:`.layout.ESCAPED`), in an escapee's session (its orphans, after it
    exited) and their descendants."""
    uid = os.getuid()
    found = {
        run_id: {pid for pid in pids if _procfs.owner(pid) == uid}
        for run_id, pids in _procfs.pids_with_env(MARKER, run_ids).items()
    }
    if root is None:
        try:  # checked (ours, private): a folder someone else could write names no pid to us
            root = runs_root()
        except Exception:
            root = None
    roots = _kin_roots(root, run_ids) if root is not None else {}
    if roots:
        table = _procfs.parents(uid)
        for run_id, kin_roots in roots.items():
            tops = kin_roots.leaders | kin_roots.escapees
            if kin_roots.sessions:
                tops |= _procfs.in_sessions(kin_roots.sessions, uid, kin_roots.since - ESCAPE_SLACK)
            kin = _procfs.descendants(tops, table) | (tops - kin_roots.leaders) & set(table)
            if kin:
                found.setdefault(run_id, set()).update(kin)
    me = os.getpid()
    return {run_id: sorted(pids - {me}) for run_id, pids in found.items() if pids - {me}}


class _KinRoots(NamedTuple):
    leaders: set[int]  # live leaders
    escapees: set[int]  # live recorded escapees
    sessions: set[int]  # every recorded escapee's pid: the session (and group) its setsid made
    since: float  # the earliest rank's start (epoch seconds): nothing of the run started before


def _kin_roots(root: Path, run_ids: set[str] | None) -> dict[str, _KinRoots]:
    """What the runs' rank folders say their processes descend from, by run id."""
    out: dict[str, _KinRoots] = {}
    try:
        names = [p.name for p in root.iterdir() if not p.name.startswith(".")] if run_ids is None else run_ids
    except OSError:
        return out
    for run_id in names:
        try:
            ranks = [p for p in (root / check_run_id(run_id)).iterdir() if p.is_dir()]
        except (OSError, ValueError):
            continue
        kin = _KinRoots(set(), set(), set(), float("inf"))
        for rank in ranks:
            meta = read_json(rank / META)
            if not meta or not meta.get("pid"):
                continue
            if leader_alive(meta):
                kin.leaders.add(int(meta["pid"]))
            live, recorded = _escapees(rank, meta)
            kin.escapees.update(live)
            if recorded and isinstance(meta.get("started"), (int, float)):
                kin.sessions.update(recorded)
                kin = kin._replace(since=min(kin.since, float(meta["started"])))
        if kin.leaders or kin.escapees or kin.sessions:
            out[run_id] = kin
    return out


def _escapees(rank: Path, meta: dict[str, Any]) -> tuple[list[int], list[int]]:
    """The live processes the rank's leader recorded as its escapees (a reused pid, started
    before the run, is not one), and every pid it recorded."""
    raw = read_small(rank / ESCAPED, 65536)
    if not raw:
        return [], []
    recorded = [int(word) for word in raw.decode("ascii", "replace").split() if word.isdigit()]
    started = float(meta.get("started") or 0)
    found = []
    for pid in recorded:
        at = _procfs.started_at(pid)
        if at is not None and at >= started - ESCAPE_SLACK:
            found.append(pid)
    return found, recorded


def outside(pids: list[int], groups: set[int]) -> list[int]:
    """The processes not in one of these (live) process groups: a run's strays."""
    return sorted(pid for pid in pids if _procfs.pgid(pid) not in groups)


if TYPE_CHECKING:
    # For the type checker only: this module travels to the workers by value, and cloudpickle
    # cannot rebuild a TypedDict that extends another there. At run time these are plain dicts.
    class _RankOnHost(TypedDict):
        rank_dir: str  # <mesh name>.<flat rank>
        pid: int | None  # the leader, its process group
        started: float | None
        host: str | None
        folder: str
        state: str  # running / exited / lost
        out_bytes: int
        err_bytes: int

    class RankOnHost(_RankOnHost, total=False):
        """One rank's state from its folder (:func:`rank_state`)."""

        returncode: int  # exited only
        ended: float  # exited only

    class RunOnHost(TypedDict):
        """What a host holds of one run (:func:`host_state`)."""

        ranks: dict[str, RankOnHost]  # by rank_dir
        strays: list[int]  # processes carrying its marker outside its running groups


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def rank_state(folder: Path) -> RankOnHost:
    """One rank's state from its folder: ``state`` is running / exited / lost."""
    meta = read_json(folder / META) or {}
    status = read_status(folder)
    if status is not None:
        state = "exited"
    elif leader_alive(meta):
        state = "running"
    else:
        state = "lost"  # killed with SIGKILL (no status), or it never started
    out: RankOnHost = {
        "rank_dir": folder.name,
        "pid": meta.get("pid"),
        "started": meta.get("started"),
        "host": meta.get("host"),
        "folder": str(folder),
        "state": state,
        "out_bytes": _size(folder / OUT),
        "err_bytes": _size(folder / ERR),
    }
    if status is not None:
        out["returncode"], out["ended"] = status
    return out


def host_state(
    run_ids: list[str], root: Path | None = None, strays: dict[str, list[int]] | None = None
) -> dict[str, RunOnHost]:
    """``{run_id: {"ranks": {rank_dir: state}, "strays": [pid…]}}`` for the runs this host holds
    (a run it does not hold is absent). ``strays``: :func:`marked_pids` if already known."""
    root = root or runs_root()
    result: dict[str, RunOnHost] = {}
    for run_id in run_ids:
        try:
            folder = root / check_run_id(run_id)
            ranks = {p.name: rank_state(p) for p in sorted(folder.iterdir()) if p.is_dir()}
        except (OSError, ValueError):
            continue
        result[run_id] = {"ranks": ranks, "strays": []}
    if result:
        for run_id, pids in (marked_pids(set(result)) if strays is None else strays).items():
            if run_id in result:
                held = result[run_id]["ranks"].values()
                groups = {r["pid"] for r in held if r["state"] == "running" and r["pid"] is not None}
                result[run_id]["strays"] = outside(pids, groups)
    return result


def _rank_metas(root: Path, run_ids: set[str]) -> Iterator[tuple[str, Path, dict[str, Any]]]:
    """Each rank folder of these runs with its meta.json: ``(run_id, folder, meta)``."""
    for run_id in run_ids:
        try:
            folders = [p for p in (root / run_id).iterdir() if p.is_dir()]
        except OSError:
            folders = []
        for folder in folders:
            meta = read_json(folder / META)
            if meta is not None:
                yield run_id, folder, meta


def _leaders(root: Path, run_ids: set[str]) -> dict[int, str]:
    """The live leaders (process groups) of these runs' ranks: ``{pgid: run_id}``."""
    return {
        int(meta["pid"]): run_id
        for run_id, _, meta in _rank_metas(root, run_ids)
        if meta.get("pid") and leader_alive(meta)
    }


def _session_cells(root: Path, run_ids: set[str]) -> list[int]:
    """The namespace processes running a cell of these runs (no status yet): stopped by Ctrl-C only."""
    return [
        int(meta["session_pid"])
        for _, folder, meta in _rank_metas(root, run_ids)
        if meta.get("session_pid") and read_status(folder) is None and leader_alive(meta)
    ]


async def stop_runs(
    run_ids: list[str], grace: float = _procfs.GRACE, root: Path | None = None, by: str | None = None
) -> dict[str, int]:
    """Stop every process of these runs on this host: each rank's group SIGINT → SIGTERM → SIGKILL
    (as Ctrl-C), and every other process of theirs (:func:`marked_pids`: those that left the
    group too); ``by`` (who stops them) is recorded in each running run's folder first. Returns ``{run_id: processes signalled}``: each of the run's processes once (not our wrapper)."""
    root = root or runs_root()
    wanted = {check_run_id(r) for r in run_ids}
    groups = _leaders(root, wanted)
    cells = _session_cells(root, wanted)
    if by:  # before any signal: whoever follows the run reads why it ended
        for run_id in set(groups.values()) | (wanted if cells else set()):
            write_stopped_by(run_id, by, root)
    for pid in cells:  # a session's cell: interrupted, its namespace lives on
        _procfs.kill(pid, signal.SIGINT)
    others: dict[int, tuple[str, int | None]] = {}  # outside the groups: pid → (run id, start)
    signalled: dict[int, str] = {}

    def look() -> None:
        _look(wanted, root, groups, others)

    def send(sig: int) -> None:
        look()
        members = _procfs.group_members(set(groups))
        for pgid, run_id in groups.items():
            if _procfs.killpg(pgid, sig):
                # the leader is our wrapper: the user's processes are counted
                signalled.update(dict.fromkeys([p for p in members.get(pgid, []) if p != pgid], run_id))
        for pid, (run_id, _) in others.items():
            if _procfs.kill(pid, sig):
                signalled[pid] = run_id

    def alive() -> bool:
        look()
        return any(_procfs.group_alive(pgid) for pgid in groups) or bool(others)

    await _procfs.escalate_async(send, alive, grace)
    await asyncio.sleep(0)
    counts = dict.fromkeys(wanted, 0)
    for run_id in signalled.values():
        counts[run_id] += 1
    return counts


def stopped_by(run_id: str, returncode: int | None) -> str | None:
    """Who stopped the run (:func:`stop_runs`' ``by``), for a rank that did not succeed: sent
    with its exit, since the kernel may not see this host's files (SSH, Slurm)."""
    return read_stopped_by(run_id) if returncode != 0 else None


def _look(
    wanted: set[str], root: Path, groups: dict[int, str], others: dict[int, tuple[str, int | None]]
) -> None:
    """Add the runs' live processes outside ``groups`` to ``others``; drop those gone."""
    for run_id, pids in marked_pids(wanted, root).items():
        for pid in outside(pids, set(groups)):
            others.setdefault(pid, (run_id, _procfs.start_ticks(pid)))
    for pid, (_, ticks) in list(others.items()):
        if not _procfs.alive(pid, ticks):
            del others[pid]


def _finished(entries: list[Path]) -> tuple[list[Path], set[Path]]:
    """The runs among ``entries`` (newest first) with no live leader, and those of them settled
    (every rank wrote its status)."""
    finished = []
    settled = set()
    for folder in entries:
        ranks = [p for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []
        statuses = [read_status(r) for r in ranks]
        if any(s is None and leader_alive(read_json(r / META)) for r, s in zip(ranks, statuses, strict=True)):
            continue
        finished.append(folder)
        if ranks and all(s is not None for s in statuses):
            settled.add(folder)
    return finished, settled


def prune(
    root: Path | None = None,
    keep: int = KEEP_RUNS,
    max_age: float = KEEP_SECONDS,
    now: float | None = None,
    min_age: float = 60.0,
) -> list[str]:
    """Remove finished runs beyond the newest ``keep`` or older than ``max_age``; the ids removed.
    A run is finished when no rank's leader is alive and no process carries its marker; one
    touched in the last ``min_age`` seconds is kept unless every rank wrote its status (without
    a status it may be starting: no meta.json yet). Settled runs go at once, so a tight loop of
    short runs does not pile up folders that every prune must walk."""
    root = root or runs_root()
    now = time.time() if now is None else now
    try:
        entries_all = [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        return []
    for spare in [p for p in entries_all if p.name.startswith(SPARE)]:
        if not spare_owner_alive(spare):  # its actor died before using it
            remove_spares(spare, None)
    try:
        entries = sorted(
            (p for p in entries_all if not p.name.startswith(".")),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
    except OSError:
        return []
    finished, settled = _finished(entries)
    candidates = [
        f
        for i, f in enumerate(finished)
        if (i >= keep or now - f.stat().st_mtime > max_age)
        and (f in settled or now - f.stat().st_mtime > min_age)
    ]
    if not candidates:
        return []
    busy = marked_pids({f.name for f in candidates})
    recycler = Recycler(root, entries_all)
    removed = []
    for folder in candidates:
        if folder.name in busy:
            continue
        recycler.recycle(folder)
        removed.append(folder.name)
    return removed


# ── following a run (ours or not) ──────────────────────────────────────
async def wait_leader(meta: dict[str, Any] | None, folder: Path) -> None:
    """Until the run's leader exited (or wrote its status)."""
    if meta is None or read_status(folder) is not None or not leader_alive(meta):
        return
    if not meta.get("pid"):  # a session cell: it ends with its status, its process lives on
        while read_status(folder) is None and leader_alive(meta):
            await asyncio.sleep(_procfs.POLL)
        return
    await _procfs.wait_exit_async(
        int(meta["pid"]), lambda: read_status(folder) is None and leader_alive(meta)
    )


async def ended_status(
    folder: Path, meta: dict[str, Any] | None
) -> tuple[int | None, float | None, str | None]:
    """After the leader exited: ``(returncode, duration, error)`` from the status file (which a
    parent that reaped a killed leader writes a moment later)."""
    deadline = time.monotonic() + STATUS_WAIT
    status = read_status(folder)
    while status is None and time.monotonic() < deadline:
        await asyncio.sleep(_procfs.POLL)
        status = read_status(folder)
    started = (meta or {}).get("started")
    if status is None:
        return (
            None,
            (time.time() - started) if started else None,
            "killed or lost: it ended without an exit status",
        )
    returncode, ended = status
    return returncode, (ended - started) if started and ended else None, None


def replay_note(tail: Tail, folder: Path) -> str:
    """What an attach says before the kept tail when it does not start at the beginning."""
    return f"… {tail.skipped} earlier bytes are in {folder}/out and err on its host\n"


def hostname() -> str:
    return socket.gethostname()
