"""Run one command in its own process group and read what it prints. No Monarch here.

The worker-side actor (:mod:`.actor`) is a thin layer of endpoints over this; the
tests drive it with plain asyncio (``tests/test_process.py``).

Start (each returns a :class:`Process`)::

    spawn(argv, env, cwd)                    # cold: a new session, stdin /dev/null, big pipes
    ShellKeeper().take(command, env, cwd)    # a bash started ahead, or None (then spawn)

Then, on one asyncio loop, any of::

    proc.tee(out_file, err_file)       # also write the raw bytes somewhere (before reading)
    proc.finish_now(limit)             # a command that ends at once: its return code, no task
    async for chunks in proc.batches(): ...   # output as it comes ([] when quiet: a heartbeat)
    await proc.finish()                # exit, then EOF (background children get ended); rc
    proc.take()                        # output not handed out yet
    await proc.stop(grace)             # SIGINT → SIGTERM → SIGKILL on the group

Starting, reading and stopping are separate on purpose: whoever reads need not be
whoever started the command, and output can be teed to a file that outlives the reader.

Output comes as :class:`~.protocol.Chunk` s — text as read, not lines, so partial lines and
``\\r`` progress bars flow; UTF-8 decoded incrementally (a character split across two
reads stays whole); ``newlines`` counted on the bytes, so no one rescans a flood.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import fcntl
import os
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from typing import IO, Any

from .protocol import ERR, OUT, Chunk

FLUSH_EVERY = 0.02  # at most one batch this often …
BATCH_BYTES = 1 << 20  # … unless this much is waiting
HEARTBEAT = 0.5  # an empty batch after this long without output
READ_SIZE = 1 << 20
PIPE_SIZE = 1 << 20  # bigger pipes: fewer wake-ups when a command floods (Linux F_SETPIPE_SZ)
MAX_INLINE = 100_000  # bytes of command passed with -c; longer ones go through a temporary file
GRACE = 0.3  # seconds between SIGINT, SIGTERM and SIGKILL
DRAIN_AFTER_EXIT = 0.5  # background children holding the pipes get this long
PREWARM_DELAY = 0.003  # after a warm shell was taken (sooner delays the run that took it), before the next
QUIET_DELAY = 0.015  # … or this much later while runs come slowly: past the kernel's own work on the answer
SLOW_RUNS = 0.1  # runs are slow when the last one came at least this long after the one before
WARM_MAX = 60_000  # bytes of script handed to a warm shell (more: a cold start)
# A warm shell sources its script from a pipe (read whole, then that fd is closed) and evals it,
# so it runs as with ``bash -c`` ($0, $LINENO, exit codes, error messages but "eval:" for syntax).
WARM_PROLOGUE = '. /dev/fd/{fd}; eval "unset __monarch_cmd; $__monarch_cmd"'


def killpg(pgid: int, sig: int) -> bool:
    """Signal a process group; False when it is gone (or not ours)."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def command_argv(mode: str, command: str) -> tuple[list[str], str | None]:
    """The argv running ``command`` with bash or Python (``mode``), and the temporary script
    it reads when the command is too long for one argv string (128 KiB on Linux), else None.
    The caller removes the script when the run is over."""
    script = None
    if len(command.encode()) > MAX_INLINE:
        fd, script = tempfile.mkstemp(prefix="monarch-remote-", suffix=".py" if mode == "python" else ".sh")
        with os.fdopen(fd, "w") as f:
            f.write(command)
    if mode == "python":
        return ([sys.executable, "-u", script] if script else [sys.executable, "-u", "-c", command]), script
    return (["bash", script] if script else ["bash", "-c", command]), script


def _popen(argv: list[str], env: dict[str, str], cwd: str | None, pass_fds: tuple = ()) -> subprocess.Popen:
    # Plain Popen + loop readers (no asyncio child watcher thread): ~3 ms less per run.
    popen = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,  # its own process group: signals reach its children too
        pass_fds=pass_fds,
    )
    for pipe in (popen.stdout, popen.stderr):  # bigger from the start, so a flood does not block it
        with contextlib.suppress(OSError):
            fcntl.fcntl(pipe.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_SIZE)
    return popen


def spawn(argv: list[str], env: dict[str, str], cwd: str | None = None) -> Process:
    """Start ``argv`` cold in a new session (its process group), stdin from /dev/null."""
    return Process(_popen(argv, env, cwd))


async def paced(
    wake: asyncio.Event,
    pending: Callable[[], int],
    take: Callable[[], list[Chunk]],
    every: float,
    max_bytes: int,
    quiet: float,
) -> AsyncIterator[list[Chunk]]:
    """Batches of ``take()`` as ``wake`` is set: at most one every ``every`` seconds (sooner once
    ``pending()`` bytes reach ``max_bytes``), ``[]`` after ``quiet`` seconds without any."""
    last = 0.0
    while True:
        try:
            await asyncio.wait_for(wake.wait(), quiet)
        except asyncio.TimeoutError:
            yield []
            continue
        wait = every - (time.monotonic() - last)
        if wait > 0 and pending() < max_bytes:
            await asyncio.sleep(wait)
        wake.clear()
        chunks = take()
        if chunks:
            yield chunks
        last = time.monotonic()


class _Pending:
    """Text of one stream read since the last batch (consecutive reads of a stream merged)."""

    __slots__ = ("newlines", "stream", "texts")

    def __init__(self, stream: str, text: str, newlines: int) -> None:
        self.stream = stream
        self.texts = [text]
        self.newlines = newlines


class _Pipe:
    """One of the command's output pipes and where its bytes go."""

    __slots__ = ("decoder", "eof", "fd", "file", "sink", "stream")

    def __init__(self, stream: str, file: IO[bytes]) -> None:
        self.stream = stream
        self.file = file
        self.fd = file.fileno()
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.sink: IO[bytes] | None = None
        self.eof: asyncio.Future | None = None  # set once read to the end (or closed), while watched


class Process:
    """One started command: its process group, its output, its exit.

    ``pid`` is the group's leader and the group id. Reading is set up lazily on the running
    loop by the first :meth:`batches`, :meth:`finish` or :meth:`stop`; before that
    :meth:`finish_now` may answer without any loop machinery (the cheap path of a short command).
    """

    def __init__(self, popen: subprocess.Popen) -> None:
        self.popen = popen
        self.pid = popen.pid
        self._pipes = [_Pipe(OUT, popen.stdout), _Pipe(ERR, popen.stderr)]
        self._open = list(self._pipes)
        self._batch: list[_Pending] = []
        self._size = 0
        self._wake = asyncio.Event()
        self._exited: asyncio.Future | None = None
        self._stopping: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def returncode(self) -> int | None:
        """The exit status once reaped (negative: killed by that signal), else None."""
        return self.popen.returncode

    def tee(self, out: IO[bytes] | None, err: IO[bytes] | None) -> None:
        """Also write the raw bytes of stdout / stderr to these files (not closed here)."""
        out_pipe, err_pipe = self._pipes
        out_pipe.sink = out
        err_pipe.sink = err

    # ── reading ─────────────────────────────────────────────────────────
    def _feed(self, pipe: _Pipe, data: bytes) -> None:
        if pipe.sink is not None and data:
            pipe.sink.write(data)
        text = pipe.decoder.decode(data, final=not data)
        if text:
            newlines = data.count(b"\n")
            batch = self._batch
            last = batch[-1] if batch else None
            if last is not None and last.stream == pipe.stream:
                last.texts.append(text)
                last.newlines += newlines
            else:
                batch.append(_Pending(pipe.stream, text, newlines))
            self._size += len(text)
            self._wake.set()

    def _close_pipe(self, pipe: _Pipe) -> None:
        if pipe not in self._open:
            return
        self._open.remove(pipe)
        if self._loop is not None:
            self._loop.remove_reader(pipe.fd)
        pipe.file.close()
        if pipe.eof is not None and not pipe.eof.done():
            pipe.eof.set_result(None)

    def _readable(self, pipe: _Pipe) -> None:
        try:
            data = os.read(pipe.fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        self._feed(pipe, data)
        if not data:
            self._close_pipe(pipe)

    def _read_available(self) -> bool:
        """Read what the pipes hold now, without waiting; True when both reached EOF."""
        for pipe in list(self._open):
            os.set_blocking(pipe.fd, False)
            while True:
                try:
                    data = os.read(pipe.fd, READ_SIZE)
                except BlockingIOError:
                    break
                self._feed(pipe, data)
                if not data:
                    self._close_pipe(pipe)
                    break
        return not self._open

    def take(self) -> list[Chunk]:
        """The output read since the last batch (and forget it)."""
        if not self._batch:
            return []
        chunks = [Chunk(p.stream, "".join(p.texts), p.newlines) for p in self._batch]
        self._batch, self._size = [], 0
        return chunks

    def _watch(self) -> None:
        """Start reading the pipes and watching for the exit on the running loop (once)."""
        if self._loop is not None:
            return
        loop = self._loop = asyncio.get_running_loop()
        exited = self._exited = loop.create_future()
        for pipe in self._pipes:
            pipe.eof = loop.create_future()
            if pipe in self._open:
                os.set_blocking(pipe.fd, False)
                loop.add_reader(pipe.fd, self._readable, pipe)
            else:
                pipe.eof.set_result(None)
        if self.popen.returncode is not None:  # reaped already (its pid may not be its own any more)
            exited.set_result(self.popen.returncode)
            return

        def reaped(returncode: int) -> None:
            if not exited.done():
                exited.set_result(returncode)

        try:  # woken the moment it exits, with no thread
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # no pidfd: wait on a helper thread
            loop.run_in_executor(None, self.popen.wait).add_done_callback(lambda f: reaped(f.result()))
            return

        def ready() -> None:  # kept until the exit even after close(), so the process is reaped
            loop.remove_reader(pidfd)
            os.close(pidfd)
            reaped(self.popen.wait())

        loop.add_reader(pidfd, ready)

    def batches(
        self, every: float = FLUSH_EVERY, max_bytes: int = BATCH_BYTES, quiet: float = HEARTBEAT
    ) -> AsyncIterator[list[Chunk]]:
        """Output as it comes: at most one batch every ``every`` seconds (sooner once
        ``max_bytes`` wait), ``[]`` after ``quiet`` seconds without any (a heartbeat).

        Runs until cancelled; what arrives after the last batch is left for :meth:`take`.
        """
        self._watch()
        return paced(self._wake, lambda: self._size, self.take, every, max_bytes, quiet)

    # ── ending ──────────────────────────────────────────────────────────
    def finish_now(self, limit: float) -> int | None:
        """The return code if the command exits within ``limit`` seconds and its output is then
        all read (blocks that long at most); else None, and what was read stays for the reader."""
        if self.popen.poll() is None:
            _wait_exit(self.popen, limit)
            if self.popen.poll() is None:
                return None
        if not self._read_available():  # something it left behind holds a pipe
            return None
        killpg(self.pid, signal.SIGKILL)  # strays that closed their pipes
        return self.popen.returncode

    async def finish(self, drain: float = DRAIN_AFTER_EXIT, grace: float = GRACE) -> int:
        """Wait for the command to exit and its output to end; the return code.

        Background children still holding the pipes ``drain`` seconds after the exit get
        SIGTERM, then SIGKILL ``grace`` seconds later; strays that closed their pipes are killed
        at once. Whatever happens (cancelled too), the group is killed and the pipes closed.
        """
        self._watch()
        try:
            returncode = await asyncio.shield(self._exited)
            pending = [pipe.eof for pipe in self._pipes if not pipe.eof.done()]
            if pending:
                _, pending = await asyncio.wait(pending, timeout=drain)
            if pending:  # background children still hold the pipes: end the group
                killpg(self.pid, signal.SIGTERM)
                await asyncio.wait(pending, timeout=grace)
        finally:
            self.close()
        return returncode

    def kill(self) -> None:
        """SIGKILL the whole group now."""
        killpg(self.pid, signal.SIGKILL)

    def close(self) -> None:
        """Kill the group and stop reading (output still in the pipes is dropped). The exit is
        still watched, so the process is reaped."""
        self.kill()
        for pipe in list(self._open):
            self._close_pipe(pipe)

    async def stop(self, grace: float = GRACE) -> None:
        """SIGINT to the group; SIGTERM if the leader is still there ``grace`` seconds later, then
        SIGKILL. Once the leader went, the rest of its group gets a moment, then SIGKILL.
        Idempotent: a second call waits for the first escalation."""
        if self._stopping is None:
            self._watch()
            self._stopping = asyncio.ensure_future(self._escalate(grace))
        await asyncio.shield(self._stopping)

    async def _escalate(self, grace: float) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            if not killpg(self.pid, sig):
                return
            try:
                await asyncio.wait_for(asyncio.shield(self._exited), grace)
            except asyncio.TimeoutError:
                continue
            # the leader is gone; give the rest of the group one more chance, then kill it
            await asyncio.sleep(0.05)
            if sig == signal.SIGINT:
                killpg(self.pid, signal.SIGTERM)
                await asyncio.sleep(0.1)
            break
        killpg(self.pid, signal.SIGKILL)


def _wait_exit(popen: subprocess.Popen, limit: float) -> None:
    """Block until ``popen`` exits or ``limit`` seconds pass (woken at the exit by a pidfd)."""
    try:
        pidfd = os.pidfd_open(popen.pid)
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        try:
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            poller.poll(limit * 1000)
        finally:
            os.close(pidfd)
        return
    deadline = time.monotonic() + limit
    delay = 0.0001
    while popen.poll() is None and time.monotonic() < deadline:
        time.sleep(delay)
        delay = min(delay * 2, 0.0005)


# ── warm shells ────────────────────────────────────────────────────────
class WarmShell:
    """A bash already started with some env and cwd, waiting to read its script from a pipe.

    Started like a cold command (same env, cwd, pipes, session), so a run that takes it differs
    only in not paying bash's exec and start-up (~2–4 ms) on its path. The script runs as with
    ``bash -c`` (see ``WARM_PROLOGUE``).
    """

    def __init__(self, env: dict[str, str], cwd: str | None) -> None:
        self.env = env
        self.cwd = cwd
        read_fd, self.write_fd = os.pipe()
        try:
            self.popen = _popen(
                ["bash", "-c", WARM_PROLOGUE.format(fd=read_fd)], env, cwd, pass_fds=(read_fd,)
            )
        except BaseException:
            os.close(self.write_fd)
            raise
        finally:
            os.close(read_fd)
        self.fd = read_fd  # its number in the shell

    def take(self, command: str) -> Process | None:
        """Hand ``command`` to the shell: its Process, or None when it cannot run it (then discarded)."""
        payload = f"exec {self.fd}<&-\n__monarch_cmd={shlex.quote(command)}\n".encode(
            "utf-8", "surrogateescape"
        )
        try:
            if len(payload) > WARM_MAX or "\0" in command or self.popen.poll() is not None:
                raise OSError("not usable")
            os.write(self.write_fd, payload)  # fits the empty pipe, and the shell is reading it
        except OSError:
            self.discard()
            return None
        os.close(self.write_fd)
        self.write_fd = -1
        return Process(self.popen)

    def discard(self) -> None:
        if self.write_fd >= 0:
            os.close(self.write_fd)  # the shell reads an empty script and exits
            self.write_fd = -1
        if self.popen.returncode is None:  # not reaped yet: its pid is still its own
            killpg(self.popen.pid, signal.SIGKILL)
        self.popen.stdout.close()
        self.popen.stderr.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(0.5)


class ShellKeeper:
    """Keeps one shell (``make(env, cwd)``, a :class:`WarmShell` by default) ready for the next
    command, started with the env and cwd of the last one (a notebook runs the same kind of
    command again and again)."""

    def __init__(
        self,
        delay: float = PREWARM_DELAY,
        make: Callable[[dict[str, str], str | None], Any] | None = None,
        quiet_delay: float = QUIET_DELAY,
    ) -> None:
        self.delay = delay
        self.quiet_delay = quiet_delay
        self.make = make or WarmShell
        self.shell: Any = None
        self._timer: asyncio.TimerHandle | None = None
        self._last_take: float | None = None

    def take(self, command: str, env: dict[str, str], cwd: str | None) -> Process | None:
        """The warm shell running ``command`` if it was started with this env and cwd, else None
        (start it cold). Either way a shell for this env and cwd is started ``delay`` seconds later."""
        return self._take_warm(env, cwd, command)

    def _take_warm(self, env: dict[str, str], cwd: str | None, *what: Any) -> Any:
        shell, self.shell = self.shell, None
        proc = None
        if shell is not None:
            if shell.env == env and shell.cwd == cwd:
                proc = shell.take(*what)
            else:
                shell.discard()
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(self.next_delay(), self._prewarm, env, cwd)
        return proc

    def next_delay(self, now: float | None = None) -> float:
        """How long after this take the next shell starts. Starting one (bash's exec: ~2 ms of
        CPU with its subshell) while the kernel still shows the answer slowed that answer by
        ~1.5 ms on 2 cores, so while runs come slowly (as a user runs cells) it waits
        ``quiet_delay``. Runs back to back keep ``delay``: there every moment is some run's, and
        later was slower (benchmarks/compare_builds.py --gap)."""
        now = time.monotonic() if now is None else now
        since, self._last_take = (None if self._last_take is None else now - self._last_take), now
        return self.quiet_delay if since is not None and since >= SLOW_RUNS else self.delay

    def _prewarm(self, env: dict[str, str], cwd: str | None) -> None:
        self._timer = None
        if self.shell is None:
            try:
                self.shell = self.make(env, cwd)
            except Exception:  # e.g. the cwd went away: no warm shell, the next run starts cold
                self.shell = None

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.shell is not None:
            self.shell.discard()
            self.shell = None
