"""The actor that runs ``%%remote`` commands on the workers: endpoints over :mod:`.process`.

One :class:`RemoteActor` per proc, spawned once per (allocation, mesh, per-host
shape) and kept warm. ``run`` starts the command in its own process group and
returns at once; a task streams its output to the caller's port as
:mod:`.protocol` messages, batched per rank (at most one every
``process.FLUSH_EVERY`` seconds, a :class:`~.protocol.Heartbeat` every
``process.HEARTBEAT`` seconds while quiet). A command that ends within
``QUICK_WAIT`` costs one :class:`~.protocol.Exit` message and no task. ``cancel``
escalates SIGINT → SIGTERM → SIGKILL on the group; ``__cleanup__`` kills every
group still alive.

A bash command runs in a warm shell when one is ready (:class:`~.process.ShellKeeper`):
a ``bash`` started after the previous run with the same environment and working
directory, which skips bash's exec and start-up (~2–4 ms) on the path of a short
command. Otherwise, and for Python, it starts cold.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Coroutine
from typing import IO, Any

from monarch.actor import Actor, context, endpoint

from .process import GRACE, Process, ShellKeeper, command_argv, spawn
from .protocol import Data, Exit, Heartbeat, RunSpec

QUICK_WAIT = 0.004  # a command that ends this fast is answered inline, in one message


def _rank_env() -> tuple[dict[str, str], dict[str, int], int]:
    rank = context().actor_instance.rank
    point = {k: int(v) for k, v in dict(rank).items()}
    extent = rank.extent
    env = {f"MONARCH_RANK_{k}": str(v) for k, v in point.items()}
    env.update({f"MONARCH_SIZE_{k}": str(v) for k, v in zip(extent.keys(), extent.sizes)})
    return env, point, int(rank.rank)


def _subdir(point: dict[str, int]) -> str:
    return "_".join(f"{k}_{v}" for k, v in point.items())


class _Leftovers:
    """What a run holds besides its process: --output-dir files, a temporary script."""

    def __init__(self) -> None:
        self.files: list[IO[bytes]] = []
        self.script: str | None = None

    def close(self) -> None:
        for f in self.files:
            f.close()
        if self.script:
            try:
                os.unlink(self.script)
            except OSError:
                pass


class RemoteActor(Actor):
    def __init__(self) -> None:
        self._runs: dict[str, Process] = {}
        self._shells = ShellKeeper()
        self._tasks: set[asyncio.Task] = set()  # the loop keeps only weak references to tasks

    def _background(self, coro: Coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @endpoint
    async def ping(self) -> int:
        return os.getpid()

    @endpoint
    async def run(self, run_id: str, key: str, spec: RunSpec, port: Any) -> None:
        """Start ``spec`` and stream it to ``port``; returns as soon as it started."""
        started = time.monotonic()
        try:
            env_extra, point, rank = _rank_env()
        except Exception as error:  # no rank: cannot even report properly
            port.send(Exit(run_id, key, -1, None, [], None, 0.0, f"no rank: {error}"))
            return
        leftovers = _Leftovers()
        try:
            proc = self._start(spec, env_extra, point, leftovers)
        except Exception as error:
            leftovers.close()
            port.send(Exit(run_id, key, rank, None, [], None, time.monotonic() - started, f"could not start: {error}"))
            return
        returncode = proc.finish_now(QUICK_WAIT)
        if returncode is not None:  # done already: one message, no task
            leftovers.close()
            port.send(Exit(run_id, key, rank, proc.pid, proc.take(), returncode, time.monotonic() - started, None))
            return
        self._runs[run_id] = proc
        self._background(self._follow(run_id, key, rank, proc, port, leftovers, started))

    def _start(self, spec: RunSpec, env_extra: dict, point: dict, leftovers: _Leftovers) -> Process:
        env = dict(os.environ)
        env.update(env_extra)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(spec.env or {})
        workdir = spec.workdir
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
                leftovers.files.append(open(os.path.join(output_dir, name), "wb"))
        argv, leftovers.script = command_argv(spec.mode, spec.command)
        proc = None
        if spec.mode != "python" and not leftovers.script:
            proc = self._shells.take(spec.command, env, workdir)
        if proc is None:
            proc = spawn(argv, env, workdir)
        if leftovers.files:
            proc.tee(*leftovers.files)
        return proc

    async def _follow(self, run_id: str, key: str, rank: int, proc: Process, port: Any,
                      leftovers: _Leftovers, started: float) -> None:
        """Send the output as it comes, then the exit (always, unless the actor is going away)."""

        async def send_batches() -> None:
            async for chunks in proc.batches():
                port.send(Data(run_id, key, rank, proc.pid, chunks) if chunks else Heartbeat(run_id, key, rank, proc.pid))

        sending = asyncio.ensure_future(send_batches())
        returncode = error = None
        try:
            returncode = await proc.finish()
        except Exception as exc:  # report it on the port: the client shows it on the rank, the actor lives on
            error = f"{type(exc).__name__}: {exc}"
        finally:  # cancelled: the actor is stopping, proc.finish() killed the group
            sending.cancel()
            leftovers.close()
            self._runs.pop(run_id, None)
        port.send(Exit(run_id, key, rank, proc.pid, proc.take(), returncode, time.monotonic() - started, error))

    @endpoint
    async def cancel(self, run_id: str, grace: float = GRACE) -> None:
        """Stop run ``run_id``: SIGINT, then SIGTERM, then SIGKILL to its process group."""
        proc = self._runs.get(run_id)
        if proc is not None:
            self._background(proc.stop(grace))

    async def __cleanup__(self, exc: Any) -> None:
        self._shells.close()
        for proc in list(self._runs.values()):
            proc.kill()
        self._runs.clear()
