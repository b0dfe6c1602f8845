"""The runs index: one small JSON file per run, ``.monarch/<context>/runs/<run_id>.json``.

Written beside the run's log (``<run_id>.log``) when the run starts and ends, never a pickle,
so any kernel in the folder lists the context's runs, and the server extension lists the
running ones (``_server/contexts.py``). One entry is a :class:`RunEntry`; its JSON is
``monarch_jupyter/schema/run_entry.schema.json`` (the tests hold the two to the same fields).
A field is added in three places: :class:`RunEntry`, :meth:`RunEntry.to_json` /
:meth:`RunEntry.from_json`, and the schema.

Whether a rank still runs is asked of its host (:mod:`.host.runs`); :func:`judge` folds what a
host said into the entry (:attr:`RunEntry.seen`, not saved) and records a run whose ranks all
ended. A run's id is its log's name, ``YYYYmmdd-HHMMSS-xxxxxx`` (UTC); :func:`find` takes any
unique part of it. No Monarch, no IPython.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ...system import files as _files
from ..errors import RunsError
from ..host import layout
from ..host import runs as host_runs
from ..view.args import RemoteArgs

if TYPE_CHECKING:
    from ...jobs.facade import JobContext
    from ..view.model import RankState

INDEX_LIMIT = 200  # newest entries read from the index (older ones are pruned with their logs)
COMMAND_CHARS = 4000  # of a command, kept in its entry
VERSION = 1
RUNNING = "running"
FINISHED = "finished"
STOPPED = "stopped"


class Where(NamedTuple):
    """Where a run is recorded, read from the session once per run (each read checks the
    folder's cache and context)."""

    root: Path  # the notebook's folder
    runs_dir: Path  # .monarch/<context>/runs: the logs and the runs index
    context: str


def job_key(apply_id: str | None, root: Path, context: str) -> str:
    """What tells a job's session namespaces from another's on a host: its allocation, else its
    folder and context (a ``--session``'s hosts keep them by it)."""
    return apply_id or f"{root}#{context}"


def where(session: JobContext) -> Where:
    context = session.context
    return Where(session.root, session.layout.dir / context / "runs", context)


# ── the entry ──────────────────────────────────────────────────────────
@dataclass
class RankRef:
    """One rank of a run, as its entry records it."""

    label: str
    mesh: str
    point: dict[str, int]
    rank: int


Pairs = tuple[tuple[str, int], ...]


@dataclass
class Selection:
    """The ``%%remote`` flags that chose the ranks, to reach them again (``%remote attach``)."""

    mesh: str | None = None
    all_meshes: bool = False
    point: Pairs | None = None
    ranks: tuple[int, ...] | None = None
    per_host: Pairs | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "mesh": self.mesh,
            "all_meshes": self.all_meshes,
            "point": [list(p) for p in self.point] if self.point is not None else None,
            "ranks": list(self.ranks) if self.ranks is not None else None,
            "per_host": [list(p) for p in self.per_host] if self.per_host else None,
        }

    @classmethod
    def from_json(cls, data: Any) -> Selection:
        p = data if isinstance(data, dict) else {}
        return cls(
            mesh=p.get("mesh"),
            all_meshes=bool(p.get("all_meshes")),
            point=tuple((str(d), int(v)) for d, v in p["point"]) if p.get("point") is not None else None,
            ranks=tuple(int(r) for r in p["ranks"]) if p.get("ranks") is not None else None,
            per_host=tuple((str(d), int(v)) for d, v in p["per_host"]) if p.get("per_host") else None,
        )


@dataclass
class HostView:
    """What the hosts said of a run just now (:func:`judge`); never saved."""

    live: bool  # the hosts answered
    running_ranks: list[str] = field(default_factory=list)
    strays: list[int] = field(default_factory=list)  # processes with the run's marker outside its groups


@dataclass
class RunEntry:
    """One run of the index. The saved fields are the schema's properties."""

    id: str
    path: str  # where the entry is written
    command: str
    mode: str
    target: str
    started: float | None
    host_dir: str  # the run's folder on each host
    ranks: list[RankRef]
    state: str = RUNNING
    version: int = VERSION
    log: str | None = None  # the kernel-side log, relative to the notebook's folder
    context: str | None = None
    apply_id: str | None = None
    local: bool = False  # the hosts are this machine
    detached: bool = False
    kernel_pid: int | None = None
    plan: Selection = field(default_factory=Selection)
    stop_reason: str | None = None
    failed: list[str] = field(default_factory=list)
    ended: float | None = None
    seen: HostView | None = field(default=None, compare=False, metadata={"saved": False})

    @property
    def is_running(self) -> bool:
        """Recorded as running, or it left processes running outside its groups."""
        return self.state == RUNNING or bool(self.seen and self.seen.strays)

    def end(
        self, state: str, failed: list[str] | None = None, stop_reason: str | None = None, later: bool = False
    ) -> None:
        """Record how the run ended (now) and save it (``later``: :func:`save_later`); what the
        hosts said no longer holds."""
        self.state = state
        if failed is not None:
            self.failed = failed
        if stop_reason is not None:
            self.stop_reason = stop_reason
        self.ended = time.time()
        self.seen = None
        if later:
            save_later(self)
        else:
            self.save()

    def save(self) -> None:
        """Write the entry atomically (another kernel may be reading it)."""
        path = Path(self.path)
        data = json.dumps(self.to_json()).encode()
        try:
            try:  # the folder is there (the run's log is in it): made only when it is not
                _files.write_atomic(path, data)
            except FileNotFoundError:
                _files.private_dir(path.parent)
                _files.write_atomic(path, data)
        except OSError:  # the index is a convenience: a full disk must not fail the run
            pass

    def end_with(
        self,
        outcomes: dict[int, tuple[int | None, str | None]],
        stop_reason: str | None,
        error: str | None,
        later: bool = False,
    ) -> None:
        """Record how a run we drove ended: ``outcomes`` are its ranks' exits by index (a rank
        without one failed with ``error``); ``stop_reason`` is None unless it was stopped;
        ``later``: written by :func:`flush_pending`, not now."""
        failed = []
        for index, rank in enumerate(self.ranks):
            returncode, why = outcomes.get(index, (None, error or "no exit seen"))
            if returncode != 0 or why:
                failed.append(f"{rank.label} ({why})" if why else f"{rank.label} (rc {returncode})")
        self.end(STOPPED if stop_reason else FINISHED, failed=failed, stop_reason=stop_reason, later=later)

    def to_json(self) -> dict[str, Any]:
        """The entry as the index keeps it: every saved field, in this order."""
        return {
            "version": self.version,
            "id": self.id,
            "path": self.path,
            "command": self.command,
            "mode": self.mode,
            "target": self.target,
            "started": self.started,
            "log": self.log,
            "host_dir": self.host_dir,
            "context": self.context,
            "apply_id": self.apply_id,
            "local": self.local,
            "detached": self.detached,
            "kernel_pid": self.kernel_pid,
            "plan": self.plan.to_json(),
            "ranks": [
                {"label": r.label, "mesh": r.mesh, "point": dict(r.point), "rank": r.rank} for r in self.ranks
            ],
            "state": self.state,
            "stop_reason": self.stop_reason,
            "failed": list(self.failed),
            "ended": self.ended,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], path: Path) -> RunEntry | None:
        """The entry saved at ``path``; None when it is not one (wrong id, no usable ranks).
        Properties it lacks (an older writer) take their defaults; unknown ones are ignored."""
        run_id = data.get("id")
        raw_ranks = data.get("ranks")
        if run_id != path.stem or not isinstance(raw_ranks, list):
            return None
        try:
            ranks = [
                RankRef(str(r["label"]), str(r["mesh"]), dict(r["point"]), int(r["rank"])) for r in raw_ranks
            ]
            plan = Selection.from_json(data.get("plan"))
        except (KeyError, TypeError, ValueError):
            return None
        failed = data.get("failed")
        return cls(
            id=run_id,
            path=str(path),
            command=_typed(data, "command", str, ""),
            mode=_typed(data, "mode", str, "bash"),
            target=_typed(data, "target", str, ""),
            started=_typed(data, "started", (int, float), None),
            host_dir=_typed(data, "host_dir", str, ""),
            ranks=ranks,
            state=_typed(data, "state", str, RUNNING),
            log=_typed(data, "log", str, None),
            context=_typed(data, "context", str, None),
            apply_id=_typed(data, "apply_id", str, None),
            local=data.get("local") is True,
            detached=data.get("detached") is True,
            kernel_pid=_typed(data, "kernel_pid", int, None),
            plan=plan,
            stop_reason=_typed(data, "stop_reason", str, None),
            failed=[str(f) for f in failed] if isinstance(failed, list) else [],
            ended=_typed(data, "ended", (int, float), None),
        )

    def to_args(self) -> RemoteArgs:
        """The ``%%remote`` arguments that plan the run's ranks again."""
        p = self.plan
        return RemoteArgs(
            command=self.command or ":",
            mode=self.mode or "bash",
            mesh=p.mesh,
            all_meshes=p.all_meshes,
            point=p.point,
            ranks=p.ranks,
            per_host=p.per_host,
        )


def saved_fields() -> set[str]:
    """The names of :class:`RunEntry`'s saved fields (the schema's properties)."""
    return {f.name for f in dataclasses.fields(RunEntry) if f.metadata.get("saved", True)}


def _typed(data: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any) -> Any:
    value = data.get(key)
    return value if isinstance(value, kind) and not isinstance(value, bool) else default


def new_entry(
    here: Where,
    run_id: str,
    args: RemoteArgs,
    target: str,
    ranks: list[RankState],
    *,
    local: bool,
    apply_id: str | None,
    log_path: Path | None,
    detached: bool = False,
) -> RunEntry:
    """The entry of a run starting now (not saved yet)."""
    log = None
    if log_path is not None:
        try:
            log = os.path.relpath(log_path, here.root)
        except ValueError:
            log = str(log_path)
    return RunEntry(
        id=run_id,
        path=str(here.runs_dir / f"{run_id}.json"),
        command=args.command[:COMMAND_CHARS],
        mode=args.mode,
        target=target,
        started=time.time(),
        log=log,
        host_dir=str(layout.runs_path() / run_id),
        context=here.context,
        apply_id=apply_id,
        local=local,
        detached=detached,
        kernel_pid=os.getpid(),
        plan=Selection(args.mesh, args.all_meshes, args.point, args.ranks, args.per_host),
        ranks=[RankRef(r.label, r.mesh, dict(r.point), r.rank) for r in ranks],
    )


# ── writes after the cell ──────────────────────────────────────────────
# A run's end is written after its cell's reply, not between its last exit and its result: the
# write (~0.5 ms of CPU, the GIL) would delay the cell. It waits here until the drive's loop
# runs flush_pending (LATER s on), any reader in this process asks (load_entries), or the
# process exits. Another process may see the run as running that long (it asks the hosts).
LATER = 0.05
_pending: dict[str, RunEntry] = {}  # entry path → its latest state
_pending_lock = threading.Lock()  # the drive's loop defers, the kernel thread may read
_atexit_armed = False


def save_later(entry: RunEntry) -> None:
    """Save ``entry`` with the next :func:`flush_pending` (its latest state, once)."""
    global _atexit_armed
    with _pending_lock:
        _pending[entry.path] = entry
        if not _atexit_armed:  # a kernel shut down right after a cell still records its end
            import atexit

            atexit.register(flush_pending)
            _atexit_armed = True


def flush_pending() -> None:
    """Write every entry :func:`save_later` holds (any thread)."""
    with _pending_lock:
        entries = list(_pending.values())
        _pending.clear()
    for entry in entries:
        entry.save()


# ── on disk ────────────────────────────────────────────────────────────
def load_entries(folder: Path) -> list[RunEntry]:
    """The runs of the index ``folder``, newest first (at most ``INDEX_LIMIT``); the ends
    :func:`save_later` holds are written first."""
    if _pending:
        flush_pending()
    try:
        names = sorted(
            (p.name for p in folder.iterdir() if p.name.endswith(".json") and not p.name.startswith(".")),
            reverse=True,
        )[:INDEX_LIMIT]
    except OSError:
        return []
    entries = []
    for name in names:
        data = layout.read_json(folder / name)
        entry = RunEntry.from_json(data, folder / name) if data else None
        if entry is not None:
            entries.append(entry)
    entries.sort(key=lambda e: e.started or 0, reverse=True)  # ids order by the second only
    return entries


def prune_index(folder: Path, keep: int) -> None:
    """Drop entries beyond the newest ``keep`` (their logs go too), except runs still running."""
    for stale in sorted(folder.glob("*.json"))[:-keep]:
        entry = layout.read_json(stale)
        if entry and entry.get("state") == RUNNING:
            continue
        with contextlib.suppress(OSError):
            stale.unlink()


def find(entries: list[RunEntry], token: str | None) -> RunEntry:
    """The entry ``token`` names (any unique part of its id); None: the newest running one."""
    if token is None:
        for entry in entries:
            if entry.is_running:
                return entry
        raise RunsError(
            "no run is running in this context: %remote runs lists them, %remote attach RUN picks one"
        )
    matches = [e for e in entries if e.id == token] or [e for e in entries if token in e.id]
    if not matches:
        raise RunsError(f"no run {token!r} in this context: %remote runs lists them")
    if len(matches) > 1:
        raise RunsError(
            f"{token!r} matches {len(matches)} runs ({', '.join(e.id for e in matches[:4])}…): give more of the id"
        )
    return matches[0]


# ── what the hosts say ─────────────────────────────────────────────────
def judge(entry: RunEntry, host: host_runs.RunOnHost | None) -> None:
    """Fold what the hosts say (``host.runs.host_state``'s value for the run; None: they could
    not be asked) into ``entry.seen``, recording the run as finished when none of its ranks
    runs. Processes carrying the run's marker outside its groups keep a run running."""
    if host is None:
        if entry.state == RUNNING:
            entry.seen = HostView(live=False)
        return
    strays = list(host["strays"])
    if entry.state != RUNNING:
        entry.seen = HostView(live=True, strays=strays)
        return
    ranks = host["ranks"]
    running, failed, ended = [], [], []
    for r in entry.ranks:
        state = ranks.get(layout.rank_name(r.mesh, r.rank))
        if state is None:
            failed.append(f"{r.label} (no folder on its host: pruned or never started)")
        elif state["state"] == "running":
            running.append(r.label)
        elif state["state"] == "exited":
            ended.append(state.get("ended") or 0)
            if state.get("returncode") != 0:
                failed.append(f"{r.label} (rc {state.get('returncode')})")
        else:
            failed.append(f"{r.label} (killed or lost: no exit status)")
    if not running:
        entry.state, entry.failed = FINISHED, failed
        entry.ended = max(ended) if ended else time.time()
        entry.save()
    entry.seen = HostView(live=True, running_ranks=running, strays=strays)


def survey_local(entries: list[RunEntry]) -> None:
    """Judge runs whose hosts are this machine from their folders here (one scan of /proc for
    stray processes): works with the workers gone."""
    strays = host_runs.marked_pids({e.id for e in entries})
    running = [e.id for e in entries if e.state == RUNNING]
    states = host_runs.host_state(running, strays=strays) if running else {}
    for entry in entries:
        host = states.get(entry.id)
        if host is None:
            host = {"ranks": {}, "strays": sorted(strays.get(entry.id, []))}
        judge(entry, host)
