"""The actor that runs ``%%remote`` commands on the workers.

One :class:`RemoteActor` per proc, spawned once per (allocation, mesh, per-host
shape) and kept warm. ``run`` starts the command in its own session (process
group) and returns at once; a task streams its stdout/stderr to the caller's
port in chunks — not lines, so partial lines and ``\\r`` progress bars flow —
batched per rank (at most one message every ``FLUSH_EVERY`` seconds, plus a
heartbeat every ``HEARTBEAT`` seconds while quiet). ``cancel`` escalates SIGINT →
SIGTERM → SIGKILL on the group; ``__cleanup__`` kills every group still alive.

A bash command runs in a warm shell when one is ready: a ``bash`` started after the
previous run with the same environment, working directory, pipes and session, waiting to
read its script from a pipe; the command then skips bash's exec and start-up (~2–4 ms
on the path of a short command). Otherwise, and for Python, it starts cold as before.

Messages on the port (plain tuples, cheap to pickle; ``pid`` is the process
group's leader, None when it could not start)::

    ("data", run_id, key, rank, pid, [(stream, text, newlines), ...])   # stream "out" / "err"
    ("hb",   run_id, key, rank, pid)
    ("exit", run_id, key, rank, pid, [(stream, text, newlines), ...], returncode, duration, error_or_None)

``newlines`` is the number of ``\n`` in ``text``, counted here on the bytes as they are
read, so the client (one process for every rank) does not scan floods to count lines.

A command that ends quickly costs one message per rank.
"""

from __future__ import annotations

import asyncio
import codecs
import fcntl
import os
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from monarch.actor import Actor, context, endpoint

FLUSH_EVERY = 0.02
HEARTBEAT = 0.5
READ_SIZE = 1 << 20
PIPE_SIZE = 1 << 20  # bigger pipes: fewer wake-ups when a command floods (Linux F_SETPIPE_SZ)
BATCH_BYTES = 1 << 20
MAX_INLINE = 100_000  # bytes of command passed with -c; longer ones go through a temporary file
QUICK_WAIT = 0.004  # a command that ends this fast is answered inline, in one message
GRACE = 0.3  # seconds between SIGINT, SIGTERM and SIGKILL
DRAIN_AFTER_EXIT = 0.5  # background children holding the pipes get this long
PREWARM_DELAY = 0.003  # after a run's last message went out (sooner delays it), before the next run
WARM_MAX = 60_000  # bytes of script handed to a warm shell (more: a cold start, as before)
# A warm shell sources its script from a pipe (read whole, then that fd is closed) and evals it,
# so it runs as with ``bash -c`` ($0, $LINENO, exit codes, error messages but "eval:" for syntax).
WARM_PROLOGUE = '. /dev/fd/{fd}; eval "unset __monarch_cmd; $__monarch_cmd"'


def _killpg(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _rank_env() -> tuple[dict[str, str], dict[str, int], int]:
    rank = context().actor_instance.rank
    point = {k: int(v) for k, v in dict(rank).items()}
    extent = rank.extent
    env = {f"MONARCH_RANK_{k}": str(v) for k, v in point.items()}
    env.update({f"MONARCH_SIZE_{k}": str(v) for k, v in zip(extent.keys(), extent.sizes)})
    return env, point, int(rank.rank)


def _grow_pipes(proc: Any) -> None:
    """Bigger pipes from the start, so a flooding command does not block while the actor waits."""
    for pipe in (proc.stdout, proc.stderr):
        try:
            fcntl.fcntl(pipe.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_SIZE)
        except OSError:
            pass


def _quick_wait(proc: Any, limit: float) -> int | None:
    """The return code if ``proc`` ends within ``limit`` seconds (blocks the actor that long, at most)."""
    returncode = proc.poll()
    if returncode is not None:
        return returncode
    try:  # woken the moment it exits, instead of at the next poll
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        try:
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            poller.poll(limit * 1000)
        finally:
            os.close(pidfd)
        return proc.poll()
    deadline = time.monotonic() + limit
    delay = 0.0001
    while True:
        returncode = proc.poll()
        if returncode is not None or time.monotonic() >= deadline:
            return returncode
        time.sleep(delay)
        delay = min(delay * 2, 0.0005)


def _drain(proc: Any) -> tuple[list, bool]:
    """Output of an exited process read so far, and whether both pipes reached EOF.

    Not complete when something it left behind still holds a pipe open; the
    pump then carries on from there (nothing read here is lost).
    """
    items = []
    complete = True
    for pipe, name in ((proc.stdout, "out"), (proc.stderr, "err")):
        fd = pipe.fileno()
        os.set_blocking(fd, False)
        chunks = []
        while True:
            try:
                data = os.read(fd, READ_SIZE)
            except BlockingIOError:
                complete = False
                break
            if not data:
                break
            chunks.append(data)
        if chunks:
            items.append((name, b"".join(chunks)))
    if complete:
        proc.stdout.close()
        proc.stderr.close()
    if not complete:
        return items, False
    return [(name, data.decode("utf-8", errors="replace"), data.count(b"\n")) for name, data in items], True


def _close(files: list) -> None:
    """Close the --output-dir files and remove the temporary script, if any."""
    for f in files[:2]:
        if f is not None:
            f.close()
    if files[2]:
        try:
            os.unlink(files[2])
        except OSError:
            pass


def _subdir(point: dict[str, int]) -> str:
    return "_".join(f"{k}_{v}" for k, v in point.items())


class _Run:
    """A started process: ``exited`` resolves to its return code (pidfd, no thread)."""

    def __init__(self, proc: Any, returncode: int | None = None) -> None:
        self.proc = proc
        self.pgid = proc.pid
        self.cancelling: asyncio.Task | None = None
        loop = asyncio.get_running_loop()
        self.exited: asyncio.Future = loop.create_future()
        if returncode is not None:  # already reaped
            self.exited.set_result(returncode)
            return
        try:
            pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # no pidfd: wait on a helper thread
            waiting = loop.run_in_executor(None, proc.wait)
            waiting.add_done_callback(lambda f: self._set(f.result()))
            return

        def ready() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            self._set(proc.wait())

        loop.add_reader(pidfd, ready)

    def _set(self, returncode: int) -> None:
        if not self.exited.done():
            self.exited.set_result(returncode)


class _WarmShell:
    """A bash already started with the next run's likely env and cwd, waiting for its script.

    Started by the same Popen as a cold run (same env, cwd, pipes, session), so a run that
    takes it differs only in not paying bash's exec and start-up (~2–4 ms) on its path.
    """

    def __init__(self, env: dict, workdir: str | None) -> None:
        self.env = env
        self.workdir = workdir
        read_fd, self.write_fd = os.pipe()
        try:
            self.proc = subprocess.Popen(
                ["bash", "-c", WARM_PROLOGUE.format(fd=read_fd)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=workdir,
                start_new_session=True,
                pass_fds=(read_fd,),
            )
            _grow_pipes(self.proc)
        except BaseException:
            os.close(self.write_fd)
            raise
        finally:
            os.close(read_fd)
        self.fd = read_fd

    def take(self, command: str) -> Any | None:
        """Hand ``command`` to the shell; its Popen, or None when it cannot run it (then discarded)."""
        payload = f"exec {self.fd}<&-\n__monarch_cmd={shlex.quote(command)}\n".encode("utf-8", "surrogateescape")
        try:
            if len(payload) > WARM_MAX or "\0" in command or self.proc.poll() is not None:
                raise OSError("not usable")
            os.write(self.write_fd, payload)  # fits the empty pipe, and the shell is reading it
        except OSError:
            self.discard()
            return None
        os.close(self.write_fd)
        self.write_fd = -1
        return self.proc

    def discard(self) -> None:
        if self.write_fd >= 0:
            os.close(self.write_fd)  # the shell reads an empty script and exits
            self.write_fd = -1
        if self.proc.returncode is None:  # not reaped yet: its pid is still its own
            _killpg(self.proc.pid, signal.SIGKILL)
        self.proc.stdout.close()
        self.proc.stderr.close()
        try:
            self.proc.wait(0.5)
        except subprocess.TimeoutExpired:
            pass


class RemoteActor(Actor):
    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}
        self._warm: _WarmShell | None = None
        self._warming: asyncio.Handle | None = None

    @endpoint
    async def ping(self) -> int:
        return os.getpid()

    @endpoint
    async def run(self, run_id: str, key: str, spec: dict, port: Any) -> None:
        """Start ``spec`` and stream it to ``port``; returns as soon as it started."""
        started = time.monotonic()
        try:
            env_extra, point, rank = _rank_env()
        except Exception as error:  # no rank: cannot even report properly
            port.send(("exit", run_id, key, -1, None, [], None, 0.0, f"no rank: {error}"))
            return
        try:
            proc, files = await self._start(spec, env_extra, point)
        except Exception as error:
            port.send(("exit", run_id, key, rank, None, [], None, time.monotonic() - started, f"could not start: {error}"))
            return
        returncode = _quick_wait(proc, QUICK_WAIT) if files[0] is None and files[1] is None else None
        early: list = []
        if returncode is not None:
            early, complete = _drain(proc)
            if complete:  # done already: one message, no task
                _killpg(proc.pid, signal.SIGKILL)  # strays that closed their pipes
                _close(files)
                port.send(("exit", run_id, key, rank, proc.pid, early, returncode, time.monotonic() - started, None))
                return
        run = _Run(proc, returncode)
        self._runs[run_id] = run
        asyncio.get_running_loop().create_task(self._pump(run_id, key, rank, run, port, files, started, early))

    async def _start(self, spec: dict, env_extra: dict, point: dict) -> tuple[Any, list]:
        env = dict(os.environ)
        env.update(env_extra)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(spec.get("env") or {})
        workdir = spec.get("workdir")
        if workdir:
            if not os.path.isdir(workdir):
                raise RuntimeError(f"--workdir {workdir} does not exist on this worker")
        else:
            fallback = spec.get("client_cwd")
            workdir = fallback if fallback and os.path.isdir(fallback) else None
        command = spec["command"]
        script = None
        if len(command.encode()) > MAX_INLINE:  # one argv string is limited to 128 KiB on Linux
            fd, script = tempfile.mkstemp(prefix="monarch-remote-", suffix=".py" if spec["mode"] == "python" else ".sh")
            with os.fdopen(fd, "w") as f:
                f.write(command)
        if spec["mode"] == "python":
            argv = [sys.executable, "-u", script] if script else [sys.executable, "-u", "-c", command]
        else:
            argv = ["bash", script] if script else ["bash", "-c", command]
        files: list = [None, None, script]
        try:
            output_dir = spec.get("output_dir")
            if output_dir:
                output_dir = output_dir.replace("$SUBDIR", _subdir(point))
                if not os.path.isabs(output_dir) and workdir:
                    output_dir = os.path.join(workdir, output_dir)
                os.makedirs(output_dir, exist_ok=True)
                files[:2] = [open(os.path.join(output_dir, name), "wb") for name in ("stdout.txt", "stderr.txt")]
            proc = None
            if spec["mode"] != "python" and not script:
                proc = self._take_warm(env, workdir, command)
            if proc is None:
                # Plain Popen + loop readers (no asyncio child watcher thread): ~3 ms less per run.
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=env,
                    cwd=workdir,
                    start_new_session=True,
                )
                _grow_pipes(proc)
        except BaseException:
            _close(files)
            raise
        return proc, files

    def _take_warm(self, env: dict, workdir: str | None, command: str) -> Any | None:
        """The warm shell running ``command`` if it was started with this env and cwd; else None.

        Either way a new warm shell for this env and cwd is started once the run is under way.
        """
        warm, self._warm = self._warm, None
        proc = None
        if warm is not None:
            if warm.env == env and warm.workdir == workdir:
                proc = warm.take(command)
            else:
                warm.discard()
        if self._warming is not None:
            self._warming.cancel()
        self._warming = asyncio.get_running_loop().call_later(PREWARM_DELAY, self._prewarm, env, workdir)
        return proc

    def _prewarm(self, env: dict, workdir: str | None) -> None:
        self._warming = None
        if self._warm is None:
            try:
                self._warm = _WarmShell(env, workdir)
            except Exception:  # no warm shell: the next run starts cold
                self._warm = None

    async def _pump(self, run_id: str, key: str, rank: int, run: _Run, port: Any, files: list, started: float,
                    early: list | None = None) -> None:
        loop = asyncio.get_running_loop()
        proc = run.proc
        pid = run.pgid
        batch: list[list] = []  # [stream, [text, ...], newlines]
        size = 0
        wake = asyncio.Event()
        error = None

        def take() -> list:
            nonlocal batch, size
            items = [(s, "".join(parts), n) for s, parts, n in batch]
            batch, size = [], 0
            return items

        def send() -> None:
            if batch:
                port.send(("data", run_id, key, rank, pid, take()))

        def watch(pipe: Any, name: str, sink: Any) -> asyncio.Future[None]:
            nonlocal size
            fd = pipe.fileno()
            os.set_blocking(fd, False)
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            for stream, data in early or ():  # bytes read by _drain before the pump started
                if stream == name:
                    text = decoder.decode(data)
                    if text:
                        batch.append([name, [text], data.count(b"\n")])
                        size += len(text)
                        wake.set()
            done = loop.create_future()

            def readable() -> None:
                nonlocal size
                try:
                    data = os.read(fd, READ_SIZE)
                except BlockingIOError:
                    return
                except OSError:
                    data = b""
                if sink is not None and data:
                    sink.write(data)
                text = decoder.decode(data, final=not data)
                if text:
                    newlines = data.count(b"\n")
                    if batch and batch[-1][0] == name:
                        batch[-1][1].append(text)
                        batch[-1][2] += newlines
                    else:
                        batch.append([name, [text], newlines])
                    size += len(text)
                    wake.set()
                if not data:
                    loop.remove_reader(fd)
                    pipe.close()
                    if not done.done():
                        done.set_result(None)

            loop.add_reader(fd, readable)

            def close_on_cancel(fut: asyncio.Future[None]) -> None:
                if fut.cancelled():
                    loop.remove_reader(fd)
                    pipe.close()

            done.add_done_callback(close_on_cancel)
            return done

        async def flusher() -> None:
            last = 0.0
            while True:
                try:
                    await asyncio.wait_for(wake.wait(), HEARTBEAT)
                except asyncio.TimeoutError:
                    port.send(("hb", run_id, key, rank, pid))
                    continue
                wait = FLUSH_EVERY - (time.monotonic() - last)
                if wait > 0 and size < BATCH_BYTES:
                    await asyncio.sleep(wait)
                wake.clear()
                send()
                last = time.monotonic()

        readers = [watch(proc.stdout, "out", files[0]), watch(proc.stderr, "err", files[1])]
        flushing = asyncio.ensure_future(flusher())
        returncode = None
        try:
            returncode = await run.exited
            done, pending = await asyncio.wait(readers, timeout=DRAIN_AFTER_EXIT)
            if pending:  # background children still hold the pipes: end the group
                _killpg(pid, signal.SIGTERM)
                done, pending = await asyncio.wait(readers, timeout=GRACE)
                _killpg(pid, signal.SIGKILL)
                for fut in pending:
                    fut.cancel()
            else:
                _killpg(pid, signal.SIGKILL)  # strays that closed their pipes
        except asyncio.CancelledError:
            _killpg(pid, signal.SIGKILL)
            raise
        except Exception as exc:  # report, never fail the actor
            error = f"{type(exc).__name__}: {exc}"
            _killpg(pid, signal.SIGKILL)
        finally:
            flushing.cancel()
            _close(files)
            self._runs.pop(run_id, None)
        port.send(("exit", run_id, key, rank, pid, take(), returncode, time.monotonic() - started, error))

    @endpoint
    async def cancel(self, run_id: str, grace: float = GRACE) -> None:
        """Stop run ``run_id``: SIGINT, then SIGTERM, then SIGKILL to its process group."""
        run = self._runs.get(run_id)
        if run is None or run.cancelling is not None:
            return
        run.cancelling = asyncio.get_running_loop().create_task(self._escalate(run, grace))

    async def _escalate(self, run: _Run, grace: float) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            if not _killpg(run.pgid, sig):
                return
            try:
                await asyncio.wait_for(asyncio.shield(run.exited), grace)
            except asyncio.TimeoutError:
                continue
            # the leader is gone; give the rest of the group one more chance, then kill it
            await asyncio.sleep(0.05)
            if sig == signal.SIGINT:
                _killpg(run.pgid, signal.SIGTERM)
                await asyncio.sleep(0.1)
            break
        _killpg(run.pgid, signal.SIGKILL)

    async def __cleanup__(self, exc: Any) -> None:
        if self._warming is not None:
            self._warming.cancel()
        if self._warm is not None:
            self._warm.discard()
            self._warm = None
        for run in list(self._runs.values()):
            _killpg(run.pgid, signal.SIGKILL)
        self._runs.clear()
