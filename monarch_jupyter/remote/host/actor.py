"""The actor that runs ``%%remote`` commands on the workers: endpoints over this package.

One :class:`RemoteActor` per proc, spawned once per (allocation, mesh, per-host shape) and kept
warm. ``run`` hands the command to a wrapper shell forked ahead (:mod:`.shell`: a bash started
after the previous run with the same environment and working directory, bringing the next run's
rank folder, :mod:`.spares`) and returns at once. The command writes its output to its rank's
folder on this host (:mod:`.layout`), so it outlives this actor (a kernel restart); a task tails
those files (:mod:`.tail`) to the caller's port as :mod:`..wire.protocol` messages, batched per rank
(at most one every ``tail.FLUSH_EVERY`` seconds, a :class:`~..protocol.Heartbeat` every
``tail.HEARTBEAT`` seconds while quiet). A command that ends within ``QUICK_WAIT`` costs one
:class:`~..protocol.Exit` message and no task (one more, a :class:`~..protocol.Data` sent as soon
as it first printed: its first line streams at once). ``cancel`` escalates SIGINT → SIGTERM →
SIGKILL on the group and stops the run's processes that left it (:func:`.runs.stop_runs`).

``start`` runs a command detached (nobody streams it); ``follow`` streams any run's rank folder
from the kept tail, live, to its exit (a fresh actor after a kernel restart finds the run by its
folder); ``unfollow`` stops following; ``runs_state`` and ``stop_runs`` read and stop runs on this
host; ``stacks`` says what a run's processes are doing (:mod:`.dumps`). ``__cleanup__`` stops
following but leaves runs running: ``%remote stop`` and ``%job kill``
stop them.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import IO, Any

from monarch.actor import Actor, context, endpoint

from ...system import procfs as _procfs
from ..wire.protocol import (
    ERR,
    OUT,
    Chunk,
    Data,
    Exit,
    GrepQuery,
    Heartbeat,
    Message,
    RunSpec,
    WireSpec,
    encode,
    spec_from_wire,
    torch_env,
)
from . import dumps, layout, runs, search, session, tail, usage
from .capture import CapturedProcess
from .shell import ShellKeeper
from .spares import prepare

# Monarch's ports (``port``, ``exc``) are untyped (no py.typed): they are ``Any`` here.
Ended = tuple["int | None", float, "str | None"]  # a run we started: (returncode, duration, error)
Running = CapturedProcess | session.SessionCell  # a command, or a session cell: followed alike

QUICK_WAIT = 0.008  # a command that ends this fast is answered inline, in one message
PRUNE_EVERY = 50  # runs started between two prunings of this host's run folders


def _free_port() -> int:
    """A TCP port free on this host now (as Monarch's SPMDActor finds MASTER_PORT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def _rank_env() -> tuple[dict[str, str], dict[str, int], int]:
    rank = context().actor_instance.rank
    point = {k: int(v) for k, v in dict(rank).items()}
    extent = rank.extent
    env = {f"MONARCH_RANK_{k}": str(v) for k, v in point.items()}
    env.update({f"MONARCH_SIZE_{k}": str(v) for k, v in zip(extent.keys(), extent.sizes, strict=True)})
    return env, point, int(rank.rank)


def _send(port: Any, message: Message) -> None:
    port.send(encode(message))  # plain tuples: see protocol


def _refused(
    run_id: str, key: str, rank: int, error: str, duration: float = 0.0, pid: int | None = None
) -> Exit:
    """The one message of a rank whose command never ran, or whose run cannot be followed:
    no output, no return code, ``error`` says why."""
    return Exit(run_id, key, rank, pid, [], None, duration, error)


def _run_meta(run_id: str, key: str, rank: int, point: dict[str, int], spec: RunSpec) -> dict[str, object]:
    """What a rank folder's meta.json says of any run (a command's or a session cell's)."""
    return {
        "run": run_id,
        "key": key,
        "rank": rank,
        "point": point,
        "mode": spec.mode,
        "command": spec.command[:2000],
        "started": time.time(),
        "marker": f"{layout.MARKER}={run_id}",
        "host": runs.hostname(),
    }


def _subdir(point: dict[str, int]) -> str:
    return "_".join(f"{k}_{v}" for k, v in point.items())


ROOM_MIN = 64 * 1024  # a run needs at least this much free in the runs folder (its meta, first lines)


class RunsFolderFull(OSError):
    """The runs folder has no room: said in one line naming it."""


def _full_line(root: object) -> str:
    return (
        f"the runs folder {root} is full (ENOSPC): free space there, or set "
        f"{layout.RUNS_DIR_ENV} to a folder with room before %job apply"
    )


def _check_room() -> None:
    """Refuse a run up front when the runs folder has no room: its files could not be written."""
    root = layout.runs_root()
    try:
        info = os.statvfs(root)
    except OSError:
        return
    if info.f_bavail * info.f_frsize < ROOM_MIN:
        raise RunsFolderFull(errno.ENOSPC, _full_line(root))


def _reason(error: BaseException) -> str:
    """One line for why a run could not start (a full disk names the runs folder)."""
    if isinstance(error, RunsFolderFull):
        return str(error.strerror)
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return _full_line(layout.runs_path())
    return str(error)


class _Leftovers:
    """What a run holds besides its process: --output-dir files."""

    def __init__(self) -> None:
        self.files: list[IO[bytes]] = []

    def close(self) -> None:
        for f in self.files:
            f.close()


class RemoteActor(Actor):
    def __init__(self) -> None:
        self._runs: dict[str, Running] = {}
        self._ended: dict[str, asyncio.Future[Ended]] = {}  # run id → how a run we started ended
        self._follows: dict[str, asyncio.Task[None]] = {}
        self._shells = ShellKeeper()
        self._tasks: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to tasks
        self._started = 0
        self._rank: tuple[dict[str, str], dict[str, int], int] | None = None
        self._worker_env: dict[str, str] | None = None  # this worker's environment with the rank's variables

    def _background(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @endpoint
    async def ping(self) -> int:
        return os.getpid()

    @endpoint
    async def master(self) -> tuple[str, int]:
        """``%%remote --torch``'s MASTER_ADDR and MASTER_PORT when this is the first rank: this
        host's name and a port free on it."""
        return socket.gethostname(), _free_port()

    @endpoint
    async def run(self, run_id: str, key: str, spec: WireSpec, port: Any) -> None:
        """Start ``spec`` (:func:`~..protocol.spec_to_wire`) and stream it to ``port``; returns as
        soon as it started."""
        self._launch(run_id, key, spec_from_wire(spec), port)

    @endpoint
    async def start(self, run_id: str, key: str, spec: WireSpec) -> tuple[int, int | None, str | None]:
        """Start ``spec`` detached (no one streams it; ``follow`` can): ``(rank, pid, error)``."""
        return self._launch(run_id, key, spec_from_wire(spec), None)

    def _launch(self, run_id: str, key: str, spec: RunSpec, port: Any) -> tuple[int, int | None, str | None]:
        started = time.monotonic()
        try:
            if self._rank is None:  # an actor's rank never changes: asked of Monarch once
                self._rank = _rank_env()
            env_extra, point, rank = self._rank
        except Exception as error:  # no rank: cannot even report properly
            message = f"no rank: {error}"
            if port is not None:
                _send(port, _refused(run_id, key, -1, message))
            return -1, None, message
        leftovers = _Leftovers()
        try:
            proc, meta = self._start(run_id, key, rank, spec, env_extra, point, leftovers)
        except Exception as error:
            leftovers.close()
            message = f"could not start: {_reason(error)}"
            if port is not None:
                _send(port, _refused(run_id, key, rank, message, time.monotonic() - started))
            return rank, None, message
        self._started += 1
        if self._started % PRUNE_EVERY == 1:  # off the path of this run
            loop = asyncio.get_running_loop()
            loop.call_later(1.0, lambda: loop.run_in_executor(None, self._prune))
        if port is not None:

            def first_lines() -> None:  # sent at once, while the quick wait goes on
                proc.tail.read()
                _send(port, Data(run_id, key, rank, proc.pid, proc.take()))

            returncode = proc.finish_now(QUICK_WAIT, on_output=first_lines)
            if returncode is not None:  # done already: its Exit, no task
                leftovers.close()
                _send(
                    port,
                    Exit(
                        run_id,
                        key,
                        rank,
                        proc.pid,
                        proc.take(),
                        returncode,
                        time.monotonic() - started,
                        proc.error,
                        None,
                        proc.value,
                    ),
                )
                with contextlib.suppress(OSError):  # the answer is sent; a full disk loses only the record
                    layout.write_meta(proc.folder, meta)  # after the answer: off the path of a short command
                return rank, proc.pid, None
        meta["start_ticks"] = _procfs.start_ticks(proc.pid)  # tells a reused pid apart
        try:
            layout.write_meta(proc.folder, meta)
        except OSError as error:  # unrecorded, no one could find or stop it: it does not run
            proc.close()
            leftovers.close()
            message = f"could not start: {_reason(error)}"
            if port is not None:
                _send(port, _refused(run_id, key, rank, message, time.monotonic() - started))
            return rank, None, message
        self._runs[run_id] = proc
        self._ended[run_id] = asyncio.get_running_loop().create_future()
        self._background(self._follow(run_id, key, rank, proc, port, leftovers, started, spec.flush_every))
        return rank, proc.pid, None

    def _start(
        self,
        run_id: str,
        key: str,
        rank: int,
        spec: RunSpec,
        env_extra: dict[str, str],
        point: dict[str, int],
        leftovers: _Leftovers,
    ) -> tuple[Running, dict[str, object]]:
        if self._worker_env is None:  # it does not change: copied once, not per run (benchmarks/README.md)
            self._worker_env = {**os.environ, **env_extra, "PYTHONUNBUFFERED": "1"}
        env = {**self._worker_env, **spec.env} if spec.env else self._worker_env
        if spec.torch:
            sizes = {k: int(env_extra[f"MONARCH_SIZE_{k}"]) for k in point}
            env = {**env, **torch_env(point, sizes, rank)}
        workdir = spec.workdir.replace("$SUBDIR", _subdir(point)) if spec.workdir else spec.workdir
        if workdir:
            if not os.path.isdir(workdir):
                raise RuntimeError(f"--workdir {workdir} does not exist on this worker")
        else:
            fallback = spec.client_cwd
            workdir = fallback if fallback and os.path.isdir(fallback) else None
        if spec.output_dir:
            output_dir = spec.output_dir.replace("$SUBDIR", _subdir(point))
            if not os.path.isabs(output_dir) and workdir:
                output_dir = os.path.join(workdir, output_dir)
            os.makedirs(output_dir, exist_ok=True)
            for name in ("stdout.txt", "stderr.txt"):
                # closed with the run (leftovers.close), not here
                leftovers.files.append(open(os.path.join(output_dir, name), "wb"))  # noqa: SIM115
        _check_room()
        folder = layout.rank_dir(run_id, key, rank)
        meta = dict(spec.meta or {})
        if spec.session:
            return self._cell(run_id, key, rank, spec, env, workdir, point, folder, meta)
        # made by the shell's take (renamed from one made ahead)
        captured = self._shells.take(folder, run_id, spec.mode, spec.command, env, workdir)
        meta.update(_run_meta(run_id, key, rank, point, spec), pid=captured.pid, start_ticks=None)
        if leftovers.files:
            captured.tee(*leftovers.files)
        return captured, meta

    def _cell(
        self,
        run_id: str,
        key: str,
        rank: int,
        spec: RunSpec,
        env: dict[str, str],
        workdir: str | None,
        point: dict[str, int],
        folder: Path,
        meta: dict[str, object],
    ) -> tuple[Running, dict[str, object]]:
        """A session cell: run in this rank's namespace process (started by the first cell)."""
        assert spec.session is not None
        job, name, first_line = spec.session
        where = session.session_dir(job, name, key, rank)
        about = {"name": name, "key": key, "rank": rank, "point": point, "job": job, "torch": spec.torch}
        record = session.ensure(where, env, workdir, about)
        prepare(folder)
        note = session.restarted_note(record)
        if note:  # in every cell of the rank, on its stderr, labelled like its output
            fd = os.open(folder / ERR, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, note.encode())
            finally:
                os.close(fd)
        request = {
            "op": "exec",
            "code": spec.command,
            "filename": f"<{name} cell {run_id[-6:]}>",  # unique: tracebacks find each cell's lines
            "first_line": first_line,
            "folder": str(folder),
            # the kernel that asks: a namespace held by the pdb of a kernel that is gone is freed
            "client": {key: (spec.meta or {}).get(f"kernel_{key}") for key in ("pid", "ticks", "boot")},
        }
        cell = session.SessionCell(record, where / session.SOCK, folder, request)
        meta.update(
            _run_meta(run_id, key, rank, point, spec),
            pid=None,  # nothing of the run to signal but Ctrl-C: the namespace outlives it
            session=name,
            session_pid=cell.pid,
            session_ticks=cell.ticks,
        )
        return cell, meta

    def _prune(self) -> None:
        with contextlib.suppress(Exception):  # housekeeping must never break a run
            runs.prune()

    async def _follow(
        self,
        run_id: str,
        key: str,
        rank: int,
        proc: Running,
        port: Any,
        leftovers: _Leftovers,
        started: float,
        flush_every: float | None = None,
    ) -> None:
        """Send the output as it comes (a message at most every ``flush_every`` s, default
        ``tail.FLUSH_EVERY``), then the exit (unless the actor is going away)."""

        async def send_batches() -> None:
            async for chunks in proc.batches(flush_every or tail.FLUSH_EVERY):
                if port is not None:
                    _send(
                        port,
                        Data(run_id, key, rank, proc.pid, chunks)
                        if chunks
                        else Heartbeat(run_id, key, rank, proc.pid),
                    )

        sending = asyncio.ensure_future(send_batches())
        returncode = error = None
        ended = self._ended.get(run_id)
        try:
            returncode = await proc.finish()
        except asyncio.CancelledError:  # the actor is stopping: the run goes on, captured on this host
            leftovers.close()
            raise
        except Exception as exc:  # report it on the port: the client shows it on the rank, the actor lives on
            error = f"{type(exc).__name__}: {exc}"
        else:
            error = proc.error
        finally:
            sending.cancel()
            self._runs.pop(run_id, None)
            self._ended.pop(run_id, None)
            if ended is not None and not ended.done():
                ended.set_result((returncode, time.monotonic() - started, error))
        last: list[Chunk] = []
        try:
            for chunks in proc.rest():  # a flood's rest in messages of bounded size, the last with the exit
                if port is not None and last:
                    _send(port, Data(run_id, key, rank, proc.pid, last))
                last = chunks
        finally:
            leftovers.close()
        if port is not None:
            duration = time.monotonic() - started
            by = runs.stopped_by(run_id, returncode)
            _send(port, Exit(run_id, key, rank, proc.pid, last, returncode, duration, error, by, proc.value))

    @endpoint
    async def cancel(self, run_id: str, grace: float = _procfs.GRACE) -> None:
        """Stop run ``run_id``: SIGINT, then SIGTERM, then SIGKILL to its process group, and to
        its processes that left the group."""
        proc = self._runs.get(run_id)
        if proc is not None:

            async def stop() -> None:
                await proc.stop(grace)
                await runs.stop_runs([run_id], grace)

            self._background(stop())

    # ── runs that outlive their kernel ──────────────────────────────────
    @endpoint
    async def follow(
        self, run_id: str, key: str, follow_id: str, port: Any, replay: int = tail.REPLAY_BYTES
    ) -> None:
        """Stream this rank's output of run ``run_id`` to ``port``: the last ``replay`` bytes per
        stream, then live, then its :class:`~..protocol.Exit`. Returns at once."""
        try:
            _, _, rank = _rank_env()
            folder = layout.rank_dir(run_id, key, rank)
        except Exception as error:
            _send(port, _refused(run_id, key, -1, f"cannot follow: {error}"))
            return
        if not folder.is_dir():
            _send(
                port,
                _refused(
                    run_id, key, rank, f"run {run_id} is not on this host (pruned, or it never started here)"
                ),
            )
            return
        self._follows[follow_id] = self._background(
            self._tail(run_id, key, rank, folder, port, replay, follow_id)
        )

    async def _tail(
        self, run_id: str, key: str, rank: int, folder: Path, port: Any, replay: int, follow_id: str
    ) -> None:
        meta = layout.read_json(folder / layout.META)
        pid = (meta or {}).get("pid")
        try:
            reader = tail.Tail(folder, replay, tail.REPLAY_LINES)
        except OSError as exc:
            _send(port, _refused(run_id, key, rank, f"cannot read the run's files: {exc}", pid=pid))
            return
        first: list[Chunk] = []
        if reader.skipped:
            first.append(Chunk(OUT, runs.replay_note(reader, folder), 1))  # shown on the rank's first line

        async def send_batches() -> None:
            nonlocal first
            async for chunks in reader.batches(tail.FLUSH_EVERY, tail.BATCH_BYTES, tail.HEARTBEAT):
                chunks, first = first + chunks, []
                _send(
                    port,
                    Data(run_id, key, rank, pid, chunks) if chunks else Heartbeat(run_id, key, rank, pid),
                )

        sending = asyncio.ensure_future(send_batches())
        duration: float | None  # None: unknown (a run we did not start, with no start time)
        try:
            ended = self._ended.get(run_id)
            if ended is not None:  # ours: the exit code comes from the reaping
                returncode, duration, error = await asyncio.shield(ended)
                started = (meta or {}).get("started")
                duration = time.time() - started if started else duration
            else:
                await runs.wait_leader(meta, folder)
                returncode, duration, error = await runs.ended_status(folder, meta)
            await asyncio.sleep(0)
            sending.cancel()
            while reader.finish(tail.LAST_BYTES):  # a flood's rest in messages of bounded size
                _send(port, Data(run_id, key, rank, pid, first + reader.take()))
                first = []
            last = first + reader.take()
            by = runs.stopped_by(run_id, returncode)
            _send(port, Exit(run_id, key, rank, pid, last, returncode, duration or 0.0, error, by))
        finally:
            sending.cancel()
            reader.close()
            self._follows.pop(follow_id, None)

    @endpoint
    async def unfollow(self, follow_id: str) -> None:
        """Stop following (the run goes on)."""
        task = self._follows.pop(follow_id, None)
        if task is not None:
            task.cancel()

    @endpoint
    async def runs_state(self, run_ids: list[str]) -> dict[str, runs.RunOnHost]:
        """What this host knows of these runs (see :func:`.runs.host_state`)."""
        return runs.host_state(run_ids)

    @endpoint
    async def stop_runs(
        self, run_ids: list[str], grace: float = _procfs.GRACE, by: str | None = None
    ) -> dict[str, int]:
        """Stop these runs' processes on this host (groups and strays): ``{run_id: signalled}``;
        ``by`` is recorded as who stopped them."""
        return await runs.stop_runs(run_ids, grace, by=by)

    @endpoint
    async def stacks(
        self, run_id: str, ranks: list[int] | None, point: dict[str, int] | None, native: bool
    ) -> list[dumps.Answer]:
        """What the processes of run ``run_id``'s ranks on this host (of this actor's host, when
        hosts share a machine) are doing: :func:`.dumps.run_stacks`."""
        try:
            if self._rank is None:
                self._rank = _rank_env()
            mine: dict[str, int] | None = self._rank[1]
        except Exception:  # no rank: every rank folder of the run on this machine
            mine = None
        return await dumps.run_stacks(run_id, ranks, point, native, mine)

    @endpoint
    async def actor_stacks(self, procs: list[dict[str, Any]], native: bool) -> list[dumps.Answer]:
        """The user's actor procs among ``procs`` that are this proc's siblings (children of this
        host's worker) are doing: :func:`.dumps.actor_stacks`."""
        return await dumps.actor_stacks(procs, native, os.getppid())

    @endpoint
    async def grep(self, run_id: str, query: tuple[Any, ...]) -> list[dict[str, Any]]:
        """The lines of run ``run_id``'s rank files on this host that ``query`` (a
        :class:`~..protocol.GrepQuery` as a plain tuple) matches: :func:`.search.grep_run`, off
        the actor's loop (files may be large)."""
        return await asyncio.to_thread(search.grep_run, run_id, GrepQuery(*query), self._mine())

    @endpoint
    async def usage(self, run_ids: list[str], interval: float) -> dict[str, list[dict[str, Any]]]:
        """CPU %, RSS and GPU memory of these runs' ranks on this host: :func:`.usage.runs_usage`."""
        return await asyncio.to_thread(usage.runs_usage, run_ids, interval, self._mine())

    # ── sessions: each rank's namespace (:mod:`.session`) ──────────────
    @endpoint
    async def session_list(self, job: str, name: str | None) -> list[dict[str, Any]]:
        """The namespaces of ``job`` this host's worker owns (``name``'s, or all), one row each."""
        found = session.records(job, name, os.getppid())
        return await asyncio.to_thread(lambda: [session.describe(f, r) for f, r in found])

    @endpoint
    async def session_stop(self, job: str, name: str | None) -> int:
        """End the namespaces of ``job`` this host's worker owns (``name``'s, or all): how many lived."""
        found = session.records(job, name, os.getppid())
        ended = await asyncio.gather(*(session.stop(f, r) for f, r in found))
        return sum(ended)

    @endpoint
    async def session_eval(
        self, job: str, name: str, key: str, expr: str, max_bytes: int
    ) -> tuple[int, bytes | None, str | None]:
        """``expr`` evaluated in this rank's namespace: ``(rank, pickled value, error)``."""
        return await asyncio.to_thread(
            self._ask_namespace, job, name, key, {"op": "eval", "expr": expr, "max_bytes": max_bytes}
        )

    @endpoint
    async def session_push(
        self, job: str, name: str, key: str, items: dict[str, bytes]
    ) -> tuple[int, bytes | None, str | None]:
        """Set these pickled values in this rank's namespace: ``(rank, None, error)``."""
        return await asyncio.to_thread(self._ask_namespace, job, name, key, {"op": "push", "items": items})

    @endpoint
    async def session_debug(
        self, job: str, name: str, key: str, line: str
    ) -> tuple[int, bytes | None, str | None]:
        """A line for the pdb of a ``breakpoint()`` in this rank's running cell."""
        return await asyncio.to_thread(self._ask_namespace, job, name, key, {"op": "debug", "line": line})

    @endpoint
    async def session_control(
        self, job: str, name: str, key: str, request: dict[str, Any]
    ) -> tuple[int, dict[str, Any] | None, str | None]:
        """A request the namespace answers on its listener thread, a cell running or not
        (``where``, ``unblock``), or on its main thread once idle (``regroup``):
        ``(rank, answer, error)``."""
        listener = request.get("op") in ("where", "unblock", "ping")
        timeout = session.ASK_TIMEOUT if listener else None
        return await asyncio.to_thread(self._ask_full, job, name, key, request, timeout)

    def _ask_full(
        self, job: str, name: str, key: str, request: dict[str, Any], timeout: float | None
    ) -> tuple[int, dict[str, Any] | None, str | None]:
        try:
            rank = self._rank_index()
            folder = session.session_dir(job, name, key, rank)
            record = session.read_record(folder)
            if record is None or not session.alive(record):
                return rank, None, f"no session {name} on this rank: run a cell with --session {name} first"
            answer = session.ask(folder / session.SOCK, request, timeout=timeout)
        except Exception as error:
            return -1, None, f"{type(error).__name__}: {error}"
        return rank, answer, answer.get("error")

    def _ask_namespace(
        self, job: str, name: str, key: str, request: dict[str, Any]
    ) -> tuple[int, bytes | None, str | None]:
        rank, answer, error = self._ask_full(job, name, key, request, None)
        if answer is None:
            return rank, None, error
        if answer.get("busy"):
            return rank, None, "busy: a cell is running in this rank's namespace (wait, or interrupt it)"
        return rank, answer.get("data"), answer.get("error")

    @endpoint
    async def session_stacks(self, job: str, name: str | None, native: bool) -> list[dumps.Answer]:
        """What the namespaces of ``job`` this host's worker owns are doing (py-spy)."""
        found = [(f, r) for f, r in session.records(job, name, os.getppid()) if session.alive(r)]
        binary = dumps.py_spy()
        procs = await asyncio.gather(*(dumps.process(int(r["pid"]), native, binary) for _, r in found))
        return [
            {
                "key": r.get("key"),
                "rank": r.get("rank"),
                "point": dict(r.get("point") or {}),
                "folder": str(f),
                "state": "running",
                "returncode": None,
                "pid": int(r["pid"]),
                "processes": [proc],
            }
            for (f, r), proc in zip(found, procs, strict=True)
        ]

    def _rank_index(self) -> int:
        if self._rank is None:
            self._rank = _rank_env()
        return self._rank[2]

    def _mine(self) -> dict[str, int] | None:
        """This actor's point (None: no rank, every rank folder of the run on this machine)."""
        try:
            if self._rank is None:
                self._rank = _rank_env()
            return self._rank[1]
        except Exception:
            return None

    async def __cleanup__(self, exc: Any) -> None:
        self._shells.close()
        for task in list(self._follows.values()):
            task.cancel()
        # runs keep running, captured on this host: %remote stop / %job kill end them
        for proc in list(self._runs.values()):
            proc.tail.close()
        self._runs.clear()
