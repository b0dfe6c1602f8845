"""Plan ``%%remote`` runs, keep their actors warm, start and follow runs, ask every rank.

:class:`RemoteRunner` keeps one warm :class:`~.host.actor.RemoteActor` mesh per (allocation, mesh,
per-host shape), respawned when the allocation changes or a rank was lost. :meth:`~RemoteRunner.plan`
resolves a run's targets against the running job; :meth:`~RemoteRunner.start` and
:meth:`~RemoteRunner.follow` hand a :class:`~.drive.Drive` to the session's event loop;
:meth:`~RemoteRunner.call_all` asks every host's actor (what ``%remote runs`` and ``stop`` use).
Runs outlive the kernel: each has an entry in the runs index (:mod:`.index`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import os
import pickle
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ...errors import MonarchJupyterError
from ...jobs import cache as _cache
from ...jobs import engines
from ...jobs import signing as _signing
from ...jobs.contexts import Layout
from ...runtime import chatter as _quiet
from ...runtime import introspect as _introspect
from ...runtime import log as _log
from ...system import files as _files
from ...system import procfs as _procfs
from ...text import timefmt as _timefmt
from ..errors import RemoteError, RunsError
from ..host import runs as host_runs
from ..view.args import RemoteArgs, check_procs
from ..view.model import RankState
from ..wire.protocol import FLUSH_EVERY, RunSpec, spec_to_wire
from .distributed import master_env
from .drive import Drive, Plan, RunHandle, Sink, Target, death_cause
from .index import FINISHED, STOPPED, RunEntry, Where, job_key, new_entry, prune_index, where

if TYPE_CHECKING:
    from ...jobs.facade import JobContext

SPAWN_TIMEOUT = 120.0
SPAWN_TRIES = 2  # a proc that sent no status in time (a loaded machine) is started once more
KEEP_LOGS = 200
MAX_WARM = 3  # warm proc meshes kept per allocation (each --per-host shape is one); LRU ones are stopped
ACTOR_NAME = "monarch_jupyter_remote"
ASK_TIMEOUT = 30.0  # for what the hosts know of runs
STOP_TIMEOUT = 60.0  # for stopping runs on every host (each escalates SIGINT → SIGTERM → SIGKILL)
FOUND_FILE = "remote_actors.pkl"  # .monarch/<context>/: a plain run's warm actors, for the next kernel
FOUND_BYTES = 1 << 20
FIND_TIMEOUT = 2.0  # the found actors' ping: no answer by then, they are spawned anew


def stopper(by: str | None) -> str | None:
    """What a stop records as its author: ``by`` and this kernel's pid."""
    return f"{by} (kernel pid {os.getpid()})" if by else None


class _WarmKey(NamedTuple):
    apply_id: str | None  # the allocation the actors run in
    mesh: str
    per_host: tuple[tuple[str, int], ...]  # --per-host


@dataclass
class _Warm:
    procs: Any  # Monarch ProcMesh (None: actors found again, whose procs end with the job)
    actors: Any  # Monarch ActorMesh of RemoteActor
    sizes: dict[str, int]
    host_dims: tuple[str, ...]
    proc_pids: list[int] = field(default_factory=list)  # flat rank → its actor's proc pid


@dataclass
class _Job:
    """The running job, as one plan reads it."""

    job: Any  # Monarch JobTrait
    meshes: dict[str, Any]  # name → HostMesh, in spec order
    apply_id: str | None
    where: Where
    local_pids: dict[str, int]  # host key → worker pid, where this machine's /proc judges them


def _points(sizes: dict[str, int]) -> list[dict[str, int]]:
    """Row-major points of an extent (flat rank = position)."""
    names = list(sizes)
    return [
        dict(zip(names, combo, strict=True)) for combo in itertools.product(*(range(sizes[n]) for n in names))
    ]


def _label(point: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in point.items())


def prune_logs(folder: str, keep: int) -> None:
    """Remove all but the newest ``keep`` ``*.log`` files of ``folder`` (their names
    start with the UTC time they were made, so name order is age order)."""
    try:
        with os.scandir(folder) as entries:
            names = sorted(e.name for e in entries if e.name.endswith(".log"))
    except OSError:
        return
    for name in names[: max(0, len(names) - keep)]:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(folder, name))


def prune_old_runs(folder: Path) -> None:
    """Remove the logs and index entries beyond the newest ``KEEP_LOGS`` of a runs folder."""
    prune_logs(str(folder), KEEP_LOGS)
    prune_index(folder, KEEP_LOGS)


SPACED_FROM = 256  # ranks: beyond this a rank's messages are spaced out …
FLUSH_MAX = 0.25  # … to at most this many seconds apart


def flush_every(ranks: int) -> float | None:
    """Seconds between one rank's messages in a run of ``ranks`` (None: the actor's
    :data:`~.protocol.FLUSH_EVERY`).

    The kernel's cost is per message: past ``SPACED_FROM`` ranks each rank batches longer, in
    proportion, up to ``FLUSH_MAX``, so a big run's message rate stops growing with its ranks
    while the cell, which shows a folded view a few times a second, looks the same."""
    if ranks <= SPACED_FROM:
        return None
    return min(FLUSH_MAX, FLUSH_EVERY * ranks / SPACED_FROM)


class RemoteRunner:
    """The session's runs (one runner a session: :func:`runner_for`); called on the kernel thread,
    and for :meth:`call_all` on a grid's request thread too."""

    drive_type: type[Drive] = Drive  # what follows one run (benchmarks/_scale_driver.py feeds its own)

    def __init__(self, session: JobContext) -> None:
        self.session = session
        self._warm: dict[_WarmKey, _Warm] = {}
        # the warm actors are looked up by the kernel thread (plans) and a grid's request thread
        # (call_all); the loop only queues meshes to drop in _forgotten, so it never waits for
        # this lock while its holder waits for the loop (a spawn runs there)
        self._warm_lock = threading.RLock()
        self._forgotten: list[str | None] = []
        self._stat_fds: dict[int, int] = {}  # worker pid → its open /proc/<pid>/stat (see _exited)
        self._runs_made = 0
        self._not_found: set[str | None] = set()  # meshes (None: all) whose saved actors were lost
        #: called (kernel thread) once a plan has to wait for the ranks' actors: spawned, or being
        #: warmed by another thread; the magic says "starting the ranks…" at once (a first run
        #: on a fresh job waits seconds before its first line)
        self.on_starting: Callable[[], None] | None = None
        self._said_starting = False

    # ── plans ──────────────────────────────────────────────────────────
    def plan(self, args: RemoteArgs) -> Plan:
        """Resolve targets against the running job, spawning actors when needed."""
        self._said_starting = False
        if not self._warm_lock.acquire(blocking=False):  # a warm-up holds it: a wait ahead
            self._starting()
            self._warm_lock.acquire()
        try:
            return self._plan(args)
        finally:
            self._warm_lock.release()

    def _starting(self) -> None:
        """Tell ``on_starting``, once a plan."""
        if self.on_starting is not None and not self._said_starting:
            self._said_starting = True
            self.on_starting()

    def _plan(self, args: RemoteArgs) -> Plan:
        running = self._current()
        names = self._mesh_names(args, running.meshes)
        per_host = tuple(args.per_host or ())
        # the rank → worker pid map (and killpg on loss) is for workers on this machine only
        job = running.job
        pids = running.local_pids
        if per_host:
            sizes = _introspect.mesh_sizes(job, running.meshes)
            check_procs({name: sizes.get(name) for name in names}, per_host)
        plan = Plan([], [], "", {}, running.where, running.apply_id)
        for name in names:
            self._add_mesh(plan, args, self._warm_for(running, name, per_host), name, len(names) > 1, pids)
        what = ("meshes " + ", ".join(names)) if len(names) > 1 else f"mesh {names[0]}"
        if args.point is not None:
            what += f" at {_label(dict(args.point))}"
        elif args.ranks is not None:
            what += " rank " + ",".join(map(str, args.ranks))
        if args.per_host:
            what += f" per host {_label(dict(args.per_host))}"
        plan.target = f"{what} ({len(plan.ranks)} rank{'s' if len(plan.ranks) != 1 else ''})"
        return plan

    def _current(self) -> _Job:
        """The running job, checked healthy; warm actors of another allocation are dropped."""
        job, state, folder, context = self.session.running()
        meshes = _introspect.host_meshes(state)
        apply_id = getattr(job, "apply_id", None)
        engine = engines.engine_for(job)
        local_pids = engine.local_processes(job)  # what this machine's /proc may judge
        self._check_health(local_pids)
        if not meshes:
            raise RemoteError("the job has no host meshes")
        while self._forgotten:
            mesh = self._forgotten.pop()
            self._not_found.add(mesh)  # a rank of it was lost: never found again, spawned anew
            for key in [k for k in self._warm if mesh is None or k.mesh == mesh]:
                del self._warm[key]
        for key in [k for k in self._warm if k.apply_id != apply_id]:
            del self._warm[key]
        root = Path(folder)
        where = Where(root, Layout(root).dir / context / "runs", context)
        return _Job(job, meshes, apply_id, where, local_pids if engine.workers_are_local else {})

    def job_identity(self) -> tuple[str | None, Where]:
        """The running job's allocation id and where its runs are recorded (checked healthy)."""
        with self._warm_lock:
            running = self._current()
        return running.apply_id, running.where

    def prewarm(self) -> bool:
        """Spawn the first mesh's actors in a plain run's shape unless they are warm (what the
        first ``%%remote`` after a restart waits for), on a background thread (the warmup's);
        whether it spawned. Never waits for a plan in progress; a failure is the next run's to
        report (it tries again)."""
        if not self._warm_lock.acquire(blocking=False):
            return False  # a plan holds it: that run spawns what it needs
        try:
            running = self._current()
            name = next(iter(running.meshes))
            if _WarmKey(running.apply_id, name, ()) in self._warm:
                return False
            self._warm_for(running, name, ())
            return True
        finally:
            self._warm_lock.release()

    @staticmethod
    def _mesh_names(args: RemoteArgs, meshes: dict[str, Any]) -> list[str]:
        if args.all_meshes:
            return list(meshes)
        if args.mesh:
            if args.mesh not in meshes:
                raise RemoteError(f"no mesh {args.mesh!r} in the job; it has: {', '.join(meshes)}")
            return [args.mesh]
        return [next(iter(meshes))]

    def _warm_for(self, running: _Job, name: str, per_host: tuple[tuple[str, int], ...]) -> _Warm:
        """The warm actors of mesh ``name`` in this shape, spawned if there are none."""
        key = _WarmKey(running.apply_id, name, per_host)
        warm = self._warm.pop(key, None)
        if warm is None:
            self._starting()
            self._evict(keep=MAX_WARM - 1)
            warm = None if per_host else self._find(running, name)
            if warm is None:
                warm = self._spawn(running.meshes[name], name, per_host)
                if not per_host:
                    self._save_found(running, name, warm)
        self._warm[key] = warm  # most recently used last
        return warm

    # ── actors found again after a restart ─────────────────────────────
    # A plain run's actors outlive the kernel that spawned them (their procs run on the job's
    # workers until the job ends). Their mesh reference is kept, pickled and signed as the job
    # cache is, so the next kernel of the job pings them (a round trip) instead of spawning
    # new ones (~0.3-1 s): kept per context, for one allocation, mesh and version of this code.
    @staticmethod
    def _found_path(where: Where) -> Path:
        return where.runs_dir.parent / FOUND_FILE

    def _save_found(self, running: _Job, name: str, warm: _Warm) -> None:
        if running.apply_id is None:
            return
        record = {
            "apply_id": running.apply_id,
            "mesh": name,
            "version": _actor_version(),
            "actors": warm.actors,
            "sizes": warm.sizes,
            "host_dims": warm.host_dims,
            "proc_pids": warm.proc_pids,
            "kernel": (os.getpid(), _procfs.start_ticks(os.getpid())),
        }
        path = self._found_path(running.where)
        try:
            data = pickle.dumps(record)
            _files.write_atomic(path, data)
            _signing.sign(path, data)
        except Exception as error:  # a convenience: the next kernel spawns instead
            _log.get(__name__).debug("could not keep the actors of mesh %s: %s", name, error)
            return
        self._not_found.discard(name)
        self._not_found.discard(None)

    def _find(self, running: _Job, name: str) -> _Warm | None:
        """The actors a previous kernel of this job spawned on mesh ``name``, if they answer
        (and, for workers on this machine, their procs live); None: spawn them."""
        if running.apply_id is None or name in self._not_found or None in self._not_found:
            return None
        path = self._found_path(running.where)
        try:
            data = _files.read_bytes(path, FOUND_BYTES, what="remote actors")
            _cache.check_safe(path)
        except (OSError, MonarchJupyterError, _files.UnsafeFileError):
            return None
        if _signing.check(path, data) is not None:  # not written by this user's kernels
            return None
        try:
            record = pickle.loads(data)  # checked above: our own, private file
            found = (record["apply_id"], record["mesh"], record["version"])
            pids = [int(p) for p in record["proc_pids"]]
        except Exception:
            return None
        if found != (running.apply_id, name, _actor_version()):
            return None
        kernel, ticks = record.get("kernel") or (None, None)
        if kernel != os.getpid() and kernel is not None and _procfs.alive(kernel, ticks):
            return None  # another kernel's, still running (a second notebook): it may stop them
        if running.local_pids and not all(_procfs.alive(pid) for pid in pids):
            return None
        actors = record["actors"]

        async def ping() -> list[int]:
            return [int(p) for p in (await actors.ping.call()).values()]

        try:
            answered = self.session.loop.run(ping(), timeout=FIND_TIMEOUT)
        except KeyboardInterrupt:
            raise
        except Exception:
            return None
        if answered != pids:  # other procs answer at these addresses: not ours any more
            return None
        _log.get(__name__).debug("found the actors of mesh %s again (procs %s)", name, pids)
        return _Warm(None, actors, dict(record["sizes"]), tuple(record["host_dims"]), pids)

    def _add_mesh(
        self, plan: Plan, args: RemoteArgs, warm: _Warm, name: str, several: bool, pids: dict[str, int]
    ) -> None:
        """Add mesh ``name``'s chosen ranks and the actor slices that reach them to ``plan``."""
        points = _points(warm.sizes)
        chosen = self._select(args, warm, points, name)
        indices: dict[int, int] = {}
        host_sizes = {d: warm.sizes[d] for d in warm.host_dims}
        for flat in chosen:
            point = points[flat]
            indices[flat] = len(plan.ranks)
            if pids:
                host = {d: point[d] for d in warm.host_dims}
                host_flat = _points(host_sizes).index(host) if host_sizes else 0
                plan.local_pids[len(plan.ranks)] = pids.get(f"{name}_{host_flat}")
                if flat < len(warm.proc_pids):
                    plan.proc_pids[len(plan.ranks)] = warm.proc_pids[flat]
            label = _label(point)
            plan.ranks.append(
                RankState(label=f"{name}/{label}" if several else label, mesh=name, point=point, rank=flat)
            )
        if args.point is not None:
            plan.targets.append(Target(name, warm.actors.slice(**dict(args.point)), indices))
        elif args.ranks is not None:
            for flat in chosen:
                plan.targets.append(Target(name, warm.actors.slice(**points[flat]), {flat: indices[flat]}))
        else:
            plan.targets.append(Target(name, warm.actors, indices))

    @staticmethod
    def _select(args: RemoteArgs, warm: _Warm, points: list[dict[str, int]], name: str) -> list[int]:
        if args.point is not None:
            for dim, value in args.point:
                if dim not in warm.sizes:
                    raise RemoteError(
                        f"--point: mesh {name} has no dimension {dim!r} (it has {_label(warm.sizes)})"
                    )
                if value >= warm.sizes[dim]:
                    raise RemoteError(f"--point: {dim}={value} is out of range (size {warm.sizes[dim]})")
            wanted = dict(args.point)
            return [i for i, p in enumerate(points) if all(p[d] == v for d, v in wanted.items())]
        if args.ranks is not None:
            for rank in args.ranks:
                if rank >= len(points):
                    raise RemoteError(
                        f"--rank {rank} is out of range: mesh {name} has {len(points)} ranks (0–{len(points) - 1})"
                    )
            return list(args.ranks)
        return list(range(len(points)))

    # ── health ─────────────────────────────────────────────────────────
    def _check_health(self, pids: dict[str, int]) -> None:
        """Raise when a worker among ``pids`` (host key → pid, on this machine) is gone."""
        exited, stopped = self._judge(set(pids.values()))
        dead = [_dead_worker(key, pid) for key, pid in pids.items() if pid in exited]
        held = [(key, pid) for key, pid in pids.items() if pid in stopped and pid not in exited]
        if held and not dead:  # a stopped worker answers nothing: Monarch would time out
            key, pid = held[0]
            raise RemoteError(f"the job is not healthy: {_procfs.stopped_line(key, pid)}")
        if dead:
            self._warm.clear()
            raise RemoteError(
                f"the job is not healthy: worker {', '.join(dead)} is dead; "
                "run %job kill then %job apply to start it again"
            )

    def _exited(self, pids: set[int]) -> set[int]:
        return self._judge(pids)[0]

    def _judge(self, pids: set[int]) -> tuple[set[int], set[int]]:
        """Which of these worker pids are gone (dead or a zombie, as :func:`_procfs.alive` says): each
        one's ``/proc/<pid>/stat`` is opened once and read again with one ``pread`` a run.
        The open file stays bound to that process: once it is reaped the read fails, even if
        the pid is reused. Not a pidfd: that wakes only when every thread of the process has
        exited, some milliseconds after its leader is a zombie."""
        for pid in set(self._stat_fds) - pids:
            os.close(self._stat_fds.pop(pid))
        gone = set()
        stopped = set()
        for pid in pids:
            fd = self._stat_fds.get(pid)
            if fd is None:
                if not _procfs.alive(pid):
                    gone.add(pid)
                    continue
                try:
                    fd = self._stat_fds[pid] = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
                except (OSError, TypeError):  # no /proc here: asked the slow way each time
                    continue
            try:
                fields: list[str] | None = _procfs.parse_stat(os.pread(fd, 1024, 0).decode(errors="replace"))
            except (OSError, ValueError):  # reaped (ESRCH)
                fields = None
            if not _procfs.fields_alive(fields):
                gone.add(pid)
            elif fields and fields[0] in _procfs.STOPPED_STATES:
                stopped.add(pid)
        return gone, stopped

    # ── warm actors ────────────────────────────────────────────────────
    def _spawn(self, host_mesh: Any, name: str, per_host: tuple[tuple[str, int], ...]) -> _Warm:
        _log.get(__name__).debug("spawning actors on mesh %s, per host %s", name, dict(per_host))
        # imported here for start-up cost: the actor imports Monarch
        from ..host import actor

        engines.send_by_value(actor)  # workers need only torchmonarch, not monarch_jupyter

        async def spawn(suffix: str = "") -> _Warm:
            procs = host_mesh.spawn_procs(per_host=dict(per_host) or None, name=f"remote_{name}{suffix}")
            actors = procs.spawn(ACTOR_NAME, actor.RemoteActor)
            pids = await actors.ping.call()
            sizes = {k: int(v) for k, v in actors.sizes.items()}
            return _Warm(procs, actors, sizes, tuple(host_mesh.sizes), [int(p) for p in pids.values()])

        _quiet.start_client_context()
        for attempt in range(SPAWN_TRIES):
            try:
                return self.session.loop.run(spawn(f"_{attempt}" if attempt else ""), timeout=SPAWN_TIMEOUT)
            except (KeyboardInterrupt, MonarchJupyterError):
                raise
            except Exception as error:
                if attempt + 1 < SPAWN_TRIES and _slow_start(error):
                    # a start that is only slow (a loaded machine) is waited for, not a failure
                    load = os.getloadavg()[0]
                    print(
                        f"%%remote: the ranks of mesh {name} were slow to start (load average "
                        f"{load:.1f} on this machine): starting them again",
                        flush=True,
                    )
                    continue
                raise RemoteError(
                    f"could not start the remote actors on mesh {name}: {_quiet.error_text(error)}"
                ) from None
        raise AssertionError("unreachable: the last try returns or raises")

    def _evict(self, keep: int) -> None:
        """Stop the least recently used warm proc meshes beyond ``keep`` (in the background)."""
        while len(self._warm) > keep:
            key = next(iter(self._warm))
            warm = self._warm.pop(key)
            if warm.procs is None:  # found again: its procs end with the job
                continue

            async def stop(procs: Any = warm.procs, mesh: str = key.mesh) -> None:
                try:
                    await asyncio.wait_for(procs.stop(), 10)
                except asyncio.TimeoutError:
                    # wedged or already gone: we hold no reference to it any more, and its procs
                    # end with the job (%job kill) anyway
                    pass
                except Exception as error:  # nobody waits on this task: say it in one line
                    print(
                        f"%remote: could not stop the unused actors of mesh {mesh}: "
                        f"{type(error).__name__}: {error}",
                        file=sys.stderr,
                    )

            self.session.loop.submit(stop())

    def forget(self, mesh: str | None = None) -> None:
        """Drop warm actors (all, or one mesh's) so the next run respawns them (any thread: the
        next plan drops them)."""
        self._forgotten.append(mesh)

    # ── every rank ─────────────────────────────────────────────────────
    def call_all(self, endpoint: str, *args: Any, timeout: float = ASK_TIMEOUT) -> list[Any]:
        """Ask every rank's actor: ``endpoint(*args)`` on every mesh of the running job (one
        actor per host, the shape a plain run uses), waiting at most ``timeout`` seconds.
        Every rank's answer, mesh by mesh. Raises what :meth:`plan` raises when there is no
        healthy running job, and what the call raises."""
        with self._warm_lock:
            self._said_starting = True  # a verb's answer is its own text: no "starting the ranks…" in it
            running = self._current()
            meshes = [self._warm_for(running, name, ()).actors for name in running.meshes]

        async def ask() -> list[Any]:
            answers: list[Any] = []
            for actors in meshes:
                answers.extend((await getattr(actors, endpoint).call(*args)).values())
            return answers

        return self.session.loop.run(ask(), timeout=timeout)

    def host_states(self, run_ids: list[str]) -> dict[str, host_runs.RunOnHost] | None:
        """``{run_id: host_state}`` (``host.runs.host_state``, merged over the hosts) through the
        actors; None when the hosts cannot be asked (the job is not running or does not answer)."""
        if not run_ids:
            return {}
        if not self.session.attached:
            return None
        try:
            answers = self.call_all("runs_state", run_ids)
        except Exception:
            return None
        merged: dict[str, host_runs.RunOnHost] = {}
        for state in answers:
            for run_id, found in state.items():
                into = merged.setdefault(run_id, {"ranks": {}, "strays": []})
                into["ranks"].update(found["ranks"])
                into["strays"] = sorted(set(into["strays"]) | set(found["strays"]))
        return merged

    def stop_runs(self, entries: list[RunEntry], by: str | None = None) -> dict[str, int]:
        """Stop these runs on every host (SIGINT → SIGTERM → SIGKILL, strays too) and record them
        stopped; ``{run_id: processes signalled}``. Local runs are stopped from here (the hosts
        are this machine: it works with the workers gone), the others through the actors. ``by``
        (e.g. ``%job kill``) is recorded with each run, for whoever follows it."""
        if not entries:
            return {}
        ids = [e.id for e in entries]
        _log.get(__name__).debug("stopping runs %s", ", ".join(ids))
        counts: dict[str, int] = {}

        def count(found: dict[str, int]) -> None:
            for run_id, n in found.items():
                counts[run_id] = max(counts.get(run_id, 0), n)

        if any(not e.local for e in entries) and self.session.attached:
            with contextlib.suppress(MonarchJupyterError):
                for found in self.call_all(
                    "stop_runs", ids, _procfs.GRACE, stopper(by), timeout=STOP_TIMEOUT
                ):
                    count(found)
        if any(e.local for e in entries):
            count(self.session.loop.run(host_runs.stop_runs(ids, by=stopper(by)), timeout=STOP_TIMEOUT))
        for entry in entries:
            if entry.is_running:
                entry.end(STOPPED, stop_reason="stopped")
        return counts

    # ── runs ───────────────────────────────────────────────────────────
    def log_path(self, plan: Plan | None = None) -> Path:
        """A new log file's path under ``.monarch/<context>/runs/`` (the folder is made;
        now and then, on a helper thread, the oldest logs and index entries beyond
        ``KEEP_LOGS`` are removed). Its name is the run's id."""
        folder = ((plan and plan.where) or where(self.session)).runs_dir
        self._runs_made += 1
        if not folder.is_dir():
            _files.private_dir(folder)
        if self._runs_made % 50 == 1:  # now and then, off the path of the run
            threading.Thread(
                target=prune_old_runs, args=(folder,), daemon=True, name="monarch-jupyter-prune"
            ).start()
        return folder / f"{_timefmt.utc_stamp()}-{uuid.uuid4().hex[:6]}.log"

    def spec(self, args: RemoteArgs, plan: Plan) -> RunSpec:
        here = plan.where or where(self.session)
        env = dict(args.env)
        if args.torch:  # the user's -e MASTER_ADDR=… / MASTER_PORT=… win
            env = {**master_env(self.session.loop, plan.targets[0].actors, ASK_TIMEOUT), **env}
        return RunSpec(
            mode=args.mode,
            command=args.command,
            env=env,
            torch=args.torch,
            flush_every=flush_every(len(plan.ranks)),
            workdir=args.workdir,
            client_cwd=str(here.root),
            output_dir=args.output_dir,
            session=self._session_of(args, plan, here),
            # what each rank's folder on its host records about who started it
            meta={
                "target": plan.target,
                "context": here.context,
                "folder": str(here.root),
                "kernel_pid": os.getpid(),
                # with the pid, what tells a kernel that is gone on this machine (a session's host)
                "kernel_ticks": _procfs.start_ticks(os.getpid()),
                "kernel_boot": _procfs.boot_id(),
                "apply_id": plan.apply_id,
            },
        )

    @staticmethod
    def _session_of(args: RemoteArgs, plan: Plan, here: Where) -> tuple[str, str, int] | None:
        if args.session is None:
            return None
        return job_key(plan.apply_id, here.root, here.context), args.session, args.cell_line

    def _entry(
        self, run_id: str, args: RemoteArgs, plan: Plan, log_path: Path | None, detached: bool = False
    ) -> RunEntry:
        return new_entry(
            plan.where or where(self.session),
            run_id,
            args,
            plan.target,
            plan.ranks,
            local=bool(plan.local_pids),
            apply_id=plan.apply_id,
            log_path=log_path,
            detached=detached,
        )

    def start(
        self,
        args: RemoteArgs,
        plan: Plan,
        sink: Sink,
        log_path: Path,
        handle: RunHandle | None = None,
    ) -> RunHandle:
        """Start the run on the loop; events go to ``sink`` (ending with Finished). The run's id
        is the log's name; its entry in the runs index is written as it starts and ends."""
        run_id = log_path.stem
        _log.get(__name__).debug("run %s starts on %s: %r", run_id, plan.target, args.command[:200])
        handle = handle or RunHandle(self.session.loop)
        drive = self.drive_type(
            run_id,
            plan,
            sink,
            handle,
            forget=self.forget,
            spec=self.spec(args, plan),
            log_path=log_path,
            timeout=args.timeout,
            entry=self._entry(run_id, args, plan, log_path),
        )
        handle.future = self.session.loop.submit(drive.run())
        return handle

    def follow(self, run_id: str, plan: Plan, sink: Sink, handle: RunHandle) -> RunHandle:
        """Follow run ``run_id`` (started by any kernel) on ``plan``'s ranks: the kept tail, then
        live, into ``sink``. ``handle.stop()`` stops following, not the run."""
        drive = Drive(run_id, plan, sink, handle, forget=self.forget, follow_id=uuid.uuid4().hex)
        handle.future = self.session.loop.submit(drive.run())
        return handle

    def start_detached(self, args: RemoteArgs, plan: Plan, log_path: Path) -> str:
        """``%%remote --detach``: start on every rank, return at once with a line naming the run
        (its id is the log's name; no kernel-side log is written)."""
        run_id = log_path.stem
        _log.get(__name__).debug("run %s starts detached on %s: %r", run_id, plan.target, args.command[:200])
        spec = self.spec(args, plan)
        entry = self._entry(run_id, args, plan, None, detached=True)
        entry.save()

        async def launch() -> list[Any]:
            results = []
            for target in plan.targets:
                results.extend(
                    (await target.actors.start.call(run_id, target.mesh, spec_to_wire(spec))).values()
                )
            return results

        try:
            results = self.session.loop.run(launch(), timeout=60)
        except Exception as error:
            entry.end(FINISHED, failed=[f"could not start: {type(error).__name__}: {error}"])
            raise RunsError(f"--detach: could not start the run: {type(error).__name__}: {error}") from None
        errors = [f"rank {rank}: {error}" for rank, _, error in results if error]
        if errors:
            self.stop_runs([entry])
            entry.end(FINISHED, failed=errors)
            raise RunsError("--detach: " + "; ".join(errors[:4]))
        return (
            f"run {run_id} started detached on {plan.target}: %remote attach {run_id} follows it, "
            f"%remote stop {run_id} stops it, %remote runs lists runs"
        )


_VERSION: list[str] = []


def _actor_version() -> str:
    """This code's version as the actors run it: the package's sources (path, size, mtime),
    hashed once a process. Actors spawned by other code are never found again."""
    if not _VERSION:
        root = Path(__file__).resolve().parents[2]
        digest = hashlib.sha256()
        for folder, _dirs, names in sorted(os.walk(root)):
            for name in sorted(n for n in names if n.endswith(".py")):
                info = os.stat(os.path.join(folder, name))
                digest.update(
                    f"{os.path.relpath(folder, root)}/{name}:{info.st_size}:{info.st_mtime_ns}\n".encode()
                )
        _VERSION.append(digest.hexdigest())
    return _VERSION[0]


def runner_for(session: JobContext) -> RemoteRunner:
    """The session's one runner (its warm actors), shared by ``%%remote`` and ``%job kill``."""
    runner: RemoteRunner | None = session.remote_runner
    if runner is None:
        runner = RemoteRunner(session)
        session.remote_runner = runner
    return runner


def _dead_worker(key: str, pid: int) -> str:
    """``hosts_0 (pid 12, killed by SIGKILL)``: the worker, and how it ended where /proc or the
    kernel log tell (a zombie's exit status, the OOM killer)."""
    cause = death_cause(pid)
    return f"{key} (pid {pid}{f', {cause}' if cause else ''})"


def _slow_start(error: BaseException) -> bool:
    """Whether a failed spawn looks like a start that was only slow: Monarch's supervision gave
    up on a proc that had not reported its status yet (measured at load 6–11), or a timeout."""
    text = str(error)
    return "no status received" in text or isinstance(error, TimeoutError) or "timed out" in text.lower()
