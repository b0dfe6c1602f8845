"""Drive ``%%remote`` runs on the session's one event loop.

:class:`RemoteRunner` keeps one warm :class:`~.actor.RemoteActor` mesh per
(allocation, mesh, per-host shape), respawned when the allocation changes or a
rank was lost. :meth:`RemoteRunner.start` opens a Channel, broadcasts the
command and consumes the ranks' chunks on the loop: it spools every line to a
log file and hands model events (:mod:`.model`) to the kernel thread through a
thread-safe queue. It also enforces ``--timeout``, stops the run on request
(interrupt), and declares a rank lost when its worker dies or stops answering.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime as _dt
import itertools
import os
import queue
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from .. import _faults, _introspect, _quiet, engines
from ..contexts import Layout
from ..errors import MonarchJupyterError
from .args import RemoteArgs
from .model import (
    Exited,
    Finished,
    Lost,
    Output,
    RankState,
    Started,
    Stopping,
)
from .protocol import Exit, Heartbeat, Message, RunSpec, decode, spec_to_wire
from .spool import Spool

HEARTBEAT_LOST = 5.0  # a running rank silent this long is lost (its actor heartbeats every 0.5 s)
FAULT_LOST = 1.5  # … this long once Monarch reported a fault
STOP_WAIT = 2.5  # after a stop request, ranks get this long to report their exit
SPAWN_TIMEOUT = 120.0
KEEP_LOGS = 200
MAX_WARM = 3  # warm proc meshes kept per allocation (each --per-host shape is one); LRU ones are stopped
ACTOR_NAME = "monarch_jupyter_remote"


class RemoteError(MonarchJupyterError):
    """A ``%%remote`` run failed (non-zero return codes, lost workers, bad target).

    Raised from the cell it shows as one line (no traceback) but still as an
    error, so nbval / papermill / nbclient runs fail.
    """

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class RemoteInterrupted(KeyboardInterrupt):
    """The cell was interrupted (or Stop was pressed): the remote processes were
    stopped and the output so far kept. A KeyboardInterrupt, so "run all" stops
    here, shown as one line instead of a traceback through the magic."""

    def _render_traceback_(self) -> list[str]:
        return [f"KeyboardInterrupt: %%remote stopped on every rank; {self}"]


# ── plans ──────────────────────────────────────────────────────────────
class _WarmKey(NamedTuple):
    apply_id: Any  # the allocation the actors run in
    mesh: str
    per_host: tuple  # ((dim, size), ...) of --per-host


@dataclass
class _Warm:
    procs: Any
    actors: Any
    sizes: dict[str, int]
    host_dims: tuple[str, ...]


@dataclass
class _Target:
    mesh: str
    actors: Any  # the (sliced) actor mesh to broadcast to
    indices: dict[int, int]  # flat rank → index in RunState.ranks


class Where(NamedTuple):
    """Where a run is recorded, read from the session once per run (each read checks the
    folder's cache and context)."""

    root: Path  # the notebook's folder
    runs_dir: Path  # .monarch/<context>/runs: the logs and the runs index
    context: str


def where(session: Any) -> Where:
    context = session.context
    return Where(session.root, session.layout.dir / context / "runs", context)


@dataclass
class Plan:
    ranks: list[RankState]
    targets: list[_Target]
    target: str
    local_pids: dict[int, int | None] = field(default_factory=dict)  # rank index → worker pid
    where: Where | None = None  # None: ask the session


def silence_limit(faults_before: int) -> float:
    """How long a running rank may stay silent before it is lost: shorter once Monarch reported
    a fault since ``faults_before`` (the value of ``_faults.count`` when the run started)."""
    return FAULT_LOST if _faults.count > faults_before else HEARTBEAT_LOST


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


# ── the runner ─────────────────────────────────────────────────────────
class RemoteRunner:
    def __init__(self, session: Any) -> None:
        self.session = session
        self._warm: dict[_WarmKey, _Warm] = {}
        self._stat_fds: dict[int, int] = {}  # worker pid → its open /proc/<pid>/stat (see _exited)

    # kernel thread ─────────────────────────────────────────────────────
    def plan(self, args: RemoteArgs) -> Plan:
        """Resolve targets against the running job, spawning actors when needed."""
        session = self.session
        job, state, folder, context = session.running()
        meshes = _introspect.host_meshes(state)
        apply_id = getattr(job, "apply_id", None)
        self._check_health(job)
        if not meshes:
            raise RemoteError("the job has no host meshes")
        if args.all_meshes:
            names = list(meshes)
        elif args.mesh:
            if args.mesh not in meshes:
                raise RemoteError(f"no mesh {args.mesh!r} in the job; it has: {', '.join(meshes)}")
            names = [args.mesh]
        else:
            names = [next(iter(meshes))]
        per_host = tuple(args.per_host or ())
        for key in [k for k in self._warm if k.apply_id != apply_id]:
            del self._warm[key]
        # the rank → worker pid map (and killpg on loss) is for workers on this machine only
        pids = _introspect.worker_pids(job) if engines.engine_for(job).workers_are_local else {}
        ranks: list[RankState] = []
        targets: list[_Target] = []
        local_pids: dict[int, int | None] = {}
        several = len(names) > 1
        for name in names:
            key = _WarmKey(apply_id, name, per_host)
            warm = self._warm.pop(key, None)
            if warm is None:
                self._evict(keep=MAX_WARM - 1)
                warm = self._spawn(meshes[name], name, per_host)
            self._warm[key] = warm  # most recently used last
            points = _points(warm.sizes)
            chosen = self._select(args, warm, points, name)
            indices: dict[int, int] = {}
            for flat in chosen:
                point = points[flat]
                label = _label(point)
                indices[flat] = len(ranks)
                if pids:
                    host_sizes = {d: warm.sizes[d] for d in warm.host_dims}
                    host_flat = (
                        _points(host_sizes).index({d: point[d] for d in warm.host_dims}) if host_sizes else 0
                    )
                    local_pids[len(ranks)] = pids.get(f"{name}_{host_flat}")
                ranks.append(
                    RankState(
                        label=f"{name}/{label}" if several else label, mesh=name, point=point, rank=flat
                    )
                )
            if args.point is not None:
                targets.append(_Target(name, warm.actors.slice(**dict(args.point)), indices))
            elif args.ranks is not None:
                for flat in chosen:
                    targets.append(_Target(name, warm.actors.slice(**points[flat]), {flat: indices[flat]}))
            else:
                targets.append(_Target(name, warm.actors, indices))
        what = ("meshes " + ", ".join(names)) if several else f"mesh {names[0]}"
        if args.point is not None:
            what += f" at {_label(dict(args.point))}"
        elif args.ranks is not None:
            what += " rank " + ",".join(map(str, args.ranks))
        if args.per_host:
            what += f" per host {_label(dict(args.per_host))}"
        target = f"{what} ({len(ranks)} rank{'s' if len(ranks) != 1 else ''})"
        root = Path(folder)
        return Plan(
            ranks, targets, target, local_pids, Where(root, Layout(root).dir / context / "runs", context)
        )

    def _select(self, args: RemoteArgs, warm: _Warm, points: list[dict], name: str) -> list[int]:
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

    def _check_health(self, job: Any) -> None:
        pids = engines.engine_for(job).local_processes(job)  # what this machine's /proc may judge
        exited = self._exited(set(pids.values()))
        dead = [f"{key} (pid {pid})" for key, pid in pids.items() if pid in exited]
        if dead:
            self._warm.clear()
            raise RemoteError(
                f"the job is not healthy: worker {', '.join(dead)} is dead; "
                "run %job kill then %job apply to start it again"
            )

    def _exited(self, pids: set[int]) -> set[int]:
        """Which of these worker pids are gone (dead or a zombie, as ``pid_alive`` says): each
        one's ``/proc/<pid>/stat`` is opened once and read again with one ``pread`` a run
        (reading it afresh took ~11 system calls a worker, each a chance for another thread to
        take the GIL). The open file stays bound to that process: once it is reaped the read
        fails, even if the pid is reused. Not a pidfd: that wakes only when every thread of
        the process has exited, some milliseconds after its leader is a zombie."""
        for pid in set(self._stat_fds) - pids:
            os.close(self._stat_fds.pop(pid))
        gone = set()
        for pid in pids:
            fd = self._stat_fds.get(pid)
            if fd is None:
                if not _introspect.pid_alive(pid):
                    gone.add(pid)
                    continue
                try:
                    fd = self._stat_fds[pid] = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
                except (OSError, TypeError):  # no /proc here: asked the slow way each time
                    continue
            try:
                state = os.pread(fd, 1024, 0).rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):  # reaped (ESRCH)
                state = b"X"
            if state in (b"Z", b"X"):
                gone.add(pid)
        return gone

    def _spawn(self, host_mesh: Any, name: str, per_host: tuple) -> _Warm:
        from .host import actor
        from .host.actor import RemoteActor

        engines.send_by_value(actor)  # workers need only torchmonarch, not monarch_jupyter

        async def spawn() -> _Warm:
            procs = host_mesh.spawn_procs(per_host=dict(per_host) or None, name=f"remote_{name}")
            actors = procs.spawn(ACTOR_NAME, RemoteActor)
            await actors.ping.call()
            sizes = {k: int(v) for k, v in actors.sizes.items()}
            return _Warm(procs, actors, sizes, tuple(host_mesh.sizes))

        _quiet.start_client_context()
        try:
            return self.session.loop.run(spawn(), timeout=SPAWN_TIMEOUT)
        except (KeyboardInterrupt, MonarchJupyterError):
            raise
        except Exception as error:
            raise RemoteError(
                f"could not start the remote actors on mesh {name}: {type(error).__name__}: {error}"
            ) from None

    def _evict(self, keep: int) -> None:
        """Stop the least recently used warm proc meshes beyond ``keep`` (in the background)."""
        while len(self._warm) > keep:
            key = next(iter(self._warm))
            warm = self._warm.pop(key)

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
        """Drop warm actors (all, or one mesh's) so the next run respawns them."""
        for key in list(self._warm):
            if mesh is None or key.mesh == mesh:
                del self._warm[key]

    def log_path(self, plan: Plan | None = None) -> Path:
        """A new log file's path under ``.monarch/<context>/runs/`` (the folder is made;
        now and then, on a helper thread, the oldest logs and index entries beyond
        ``KEEP_LOGS`` are removed)."""
        folder = ((plan and plan.where) or where(self.session)).runs_dir
        self._runs_made = getattr(self, "_runs_made", 0) + 1
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
        if self._runs_made % 50 == 1:  # now and then, off the path of the run
            threading.Thread(
                target=prune_old_runs, args=(folder,), daemon=True, name="monarch-jupyter-prune"
            ).start()
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
        return folder / f"{stamp}-{uuid.uuid4().hex[:6]}.log"

    def spec(self, args: RemoteArgs, plan: Plan, run_id: str) -> RunSpec:
        from . import runs

        return RunSpec(
            mode=args.mode,
            command=args.command,
            env=dict(args.env),
            workdir=args.workdir,
            client_cwd=str((plan.where or where(self.session)).root),
            output_dir=args.output_dir,
            meta=runs.host_meta(self.session, plan),
        )

    def start(
        self,
        args: RemoteArgs,
        plan: Plan,
        sink: queue.SimpleQueue,
        log_path: Path,
        handle: RunHandle | None = None,
    ) -> RunHandle:
        """Start the run on the loop; events go to ``sink`` (ending with Finished). The run's id
        is the log's name; its entry in the runs index (:mod:`.runs`) is written as it starts
        and ends."""
        from . import runs

        run_id = log_path.stem
        spec = self.spec(args, plan, run_id)
        handle = handle or RunHandle(self.session.loop)
        entry = runs.new_entry(self.session, run_id, args, plan, log_path)
        drive = _Drive(self, run_id, spec, plan, sink, log_path, args.timeout, handle, entry=entry)
        handle.future = self.session.loop.submit(drive.run())
        return handle

    def follow(self, run_id: str, plan: Plan, sink: queue.SimpleQueue, handle: RunHandle) -> RunHandle:
        """Follow run ``run_id`` (started by any kernel) on ``plan``'s ranks: the kept tail, then
        live, into ``sink``. ``handle.stop()`` stops following, not the run."""
        drive = _Drive(self, run_id, None, plan, sink, None, None, handle, follow_id=uuid.uuid4().hex)
        handle.future = self.session.loop.submit(drive.run())
        return handle


def prune_old_runs(folder: Path) -> None:
    """Remove the logs and index entries beyond the newest ``KEEP_LOGS`` of a runs folder."""
    from . import runs

    prune_logs(str(folder), KEEP_LOGS)
    runs.prune_index(folder, KEEP_LOGS)


def runner_for(session: Any) -> RemoteRunner:
    """The session's one runner (its warm actors), shared by ``%%remote`` and ``%job kill``."""
    runner = getattr(session, "_remote_runner", None)
    if runner is None:
        runner = session._remote_runner = RemoteRunner(session)
    return runner


class RunHandle:
    """The kernel thread's grip on a running drive."""

    def __init__(self, loop_thread: Any) -> None:
        self._loop_thread = loop_thread
        self.future: concurrent.futures.Future | None = None
        self.stop_reason: str | None = None

    def stop(self, reason: str = "interrupted") -> None:
        """Ask the drive to stop every rank (thread-safe, idempotent)."""
        if self.stop_reason is None:
            self.stop_reason = reason


# ── the loop side ──────────────────────────────────────────────────────
class _Drive:
    def __init__(
        self,
        runner: RemoteRunner,
        run_id: str,
        spec: RunSpec | None,
        plan: Plan,
        sink: Any,
        log_path: Path | None,
        timeout: float | None,
        handle: RunHandle,
        entry: dict | None = None,
        follow_id: str | None = None,
    ) -> None:
        self.runner = runner
        self.run_id = run_id
        self.spec = spec
        self.plan = plan
        self.sink = sink
        self.log_path = log_path
        self.timeout = timeout
        self.handle = handle
        self.index = {(t.mesh, flat): i for t in plan.targets for flat, i in t.indices.items()}
        self.pgids: dict[int, int] = {}
        self.entry = entry  # the runs index entry (a run we start), written as it starts and ends
        self.follow_id = follow_id  # following a run (attach) rather than starting it
        self.outcomes: dict[int, tuple] = {}  # rank index → (returncode, error)

    async def run(self) -> None:
        from monarch.actor import Channel

        sink = self.sink
        spool = None
        error = None
        remaining = set(range(len(self.plan.ranks)))
        try:
            port, receiver = Channel.open()
            reader = _introspect.PortReader(receiver)
            wire = spec_to_wire(self.spec) if self.spec is not None else None
            for target in self.plan.targets:
                if self.follow_id:
                    target.actors.follow.broadcast(self.run_id, target.mesh, self.follow_id, port)
                else:
                    target.actors.run.broadcast(self.run_id, target.mesh, wire, port)
            start = time.monotonic()
            # the log is opened while the ranks start (off the path of a short command); the index
            # entry is written once a rank streams or the run outlasts 50 ms (a short run: once, at
            # its end, not between one rank's exit and the next)
            entry_saved = self.entry is None
            if self.log_path is not None:
                spool = Spool(self.log_path, [r.label for r in self.plan.ranks])
                spool.note(f"%%remote {self.spec.mode} on {self.plan.target}: {self.spec.command[:200]!r}")
            else:
                spool = _NoSpool()
            heard = {i: start for i in remaining}
            deadline = start + self.timeout if self.timeout else None
            faults_before = _faults.count
            stop_at = None
            pending_recv = None
            last_pid_check = start
            while remaining:
                now = time.monotonic()
                if stop_at is None:
                    reason = self.handle.stop_reason
                    if reason is None and deadline is not None and now >= deadline:
                        reason = self.handle.stop_reason = "timed_out"
                    if reason is not None and self.follow_id:  # stop following; the run goes on
                        self._unfollow()
                        break
                    if reason is not None:
                        stop_at = now
                        sink.put(Stopping(reason))
                        spool.note(f"stopping: {reason}")
                        for target in self.plan.targets:
                            target.actors.cancel.broadcast(self.run_id)
                elif now - stop_at > STOP_WAIT:
                    for i in sorted(remaining):
                        self._lost(i, "did not stop in time", spool)
                    remaining.clear()
                    break
                limit = silence_limit(faults_before)
                if now - last_pid_check > 0.25:
                    last_pid_check = now
                    for i in sorted(remaining):
                        pid = self.plan.local_pids.get(i)
                        if pid is not None and not _introspect.pid_alive(pid):
                            self._lost(i, f"worker process {pid} died", spool)
                            remaining.discard(i)
                for i in sorted(remaining):
                    if now - heard[i] > limit:
                        self._lost(i, f"worker stopped answering ({limit:g} s)", spool)
                        remaining.discard(i)
                if not remaining:
                    break
                if pending_recv is None:
                    pending_recv = reader.next()
                done, _ = await asyncio.wait({pending_recv}, timeout=0.05)
                if not done:
                    if not entry_saved:
                        entry_saved = self._save_entry()
                    continue
                message = decode(reader.value(pending_recv.result()))
                pending_recv = None
                self._handle(message, heard, remaining, spool)
                if not entry_saved and remaining and type(message) is not Exit:  # it streams: not a quick run
                    entry_saved = self._save_entry()
                # drain whatever else is ready without waiting
                while remaining:
                    pending_recv = reader.next()
                    await asyncio.sleep(0)
                    if not pending_recv.done():
                        break
                    message = decode(reader.value(pending_recv.result()))
                    pending_recv = None
                    self._handle(message, heard, remaining, spool)
                spool.maybe_flush()
            if pending_recv is not None:
                pending_recv.cancel()
        except asyncio.CancelledError:
            error = "cancelled"
            self._unfollow() if self.follow_id else self._cancel_all()
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            self._unfollow() if self.follow_id else self._cancel_all()
        finally:
            if spool is not None:
                try:
                    spool.close()
                except (
                    OSError
                ) as exc:  # disk full, folder removed: the output was shown, say the log is not whole
                    error = error or f"could not write the log {self.log_path}: {exc}"
            sink.put(Finished(error))
            if self.entry is not None:  # after the cell was told: off the path of a short command
                from . import runs

                runs.end_entry(self.entry, self.plan, self.outcomes, self.handle.stop_reason, error)

    def _save_entry(self) -> bool:
        from . import runs

        runs.save_entry(self.entry)
        return True

    def _unfollow(self) -> None:
        for target in self.plan.targets:
            with contextlib.suppress(Exception):
                target.actors.unfollow.broadcast(self.follow_id)

    def _cancel_all(self) -> None:
        for target in self.plan.targets:
            # a mesh whose workers died takes no message; its processes died with them
            with contextlib.suppress(Exception):
                target.actors.cancel.broadcast(self.run_id)

    def _lost(self, index: int, why: str, spool: Spool) -> None:
        rank = self.plan.ranks[index]
        self.outcomes[index] = (None, why)
        self.sink.put(Lost(index, why))
        spool.note(f"{rank.label}: {why}")
        self.runner.forget(rank.mesh)
        pgid = self.pgids.get(index)
        # a local job: the process group is on this machine
        if pgid and self.plan.local_pids and not self.follow_id:
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)

    def _handle(self, message: Message, heard: dict, remaining: set, spool: Spool) -> None:
        if message.run_id != self.run_id:
            return
        index = self.index.get((message.key, message.rank))
        if index is None or index not in remaining:
            return
        heard[index] = time.monotonic()
        if index not in self.pgids and message.pid:
            self.pgids[index] = message.pid
            self.sink.put(Started(index, message.pid))
        if type(message) is Heartbeat:
            return
        for chunk in message.chunks:  # to the cell first, then to the log
            self.sink.put(Output(index, chunk.stream, chunk.text, chunk.newlines))
        for chunk in message.chunks:
            spool.write(index, chunk.stream, chunk.text)
        if type(message) is Exit:
            remaining.discard(index)
            if message.error:
                spool.note(f"{self.plan.ranks[index].label}: {message.error}")
            self.outcomes[index] = (message.returncode, message.error)
            self.sink.put(Exited(index, message.returncode, message.duration, message.error))


class _NoSpool:
    """Following a run writes no kernel-side log: the run's files on its hosts are the log."""

    def write(self, *_: Any) -> None: ...

    def note(self, *_: Any) -> None: ...

    def maybe_flush(self) -> None: ...

    def close(self) -> None: ...
