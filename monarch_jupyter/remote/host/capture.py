"""A command we started, in its own process group, its output read from its rank folder.

Starting, reading and stopping are separate: the command writes its output to files
(:mod:`.tail` reads them), so whoever reads need not be whoever started it, and the command
outlives the reader. On one asyncio loop, any of::

    proc.finish_now(limit)             # a command that ends at once: its return code, no task
    async for chunks in proc.batches(): ...   # output as it comes ([] when quiet: a heartbeat)
    await proc.finish()                # exit, then background children get ended; rc
    proc.rest()                        # then what is left in the files, in bounded batches
    await proc.stop(grace)             # SIGINT → SIGTERM → SIGKILL on the group
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import IO

from ...system import procfs as _procfs
from ..wire.protocol import Chunk
from .layout import write_status
from .tail import BATCH_BYTES, FLUSH_EVERY, HEARTBEAT, LAST_BYTES, Tail

SLICE = 0.00025  # while a quick command runs, how often its files are looked at for output
DRAIN_AFTER_EXIT = 0.5  # background children of an exited command get this long, then SIGTERM


class RankOutput:
    """What a run of one rank writes to its folder, read by a :class:`~.tail.Tail`: the part a
    command (:class:`CapturedProcess`) and a session cell (:class:`~.session.SessionCell`) share.
    ``value`` and ``error`` are a session cell's shown last expression and failure line."""

    value: str | None = None
    error: str | None = None

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.tail = Tail(folder)

    def tee(self, out: IO[bytes] | None, err: IO[bytes] | None) -> None:
        """Also write the raw bytes of stdout / stderr to these files (not closed here)."""
        self.tail.tee(out, err)

    def take(self) -> list[Chunk]:
        """The output read since the last batch (and forget it)."""
        return self.tail.take()

    def _watch(self) -> None:
        self.tail.watch()

    def batches(
        self, every: float = FLUSH_EVERY, max_bytes: int = BATCH_BYTES, quiet: float = HEARTBEAT
    ) -> AsyncIterator[list[Chunk]]:
        """Output as it comes (see :meth:`.tail.Tail.batches`)."""
        self._watch()
        return self.tail.batches(every, max_bytes, quiet)

    def rest(self, max_bytes: int = LAST_BYTES) -> Iterator[list[Chunk]]:
        """After the end: what is left in the files, in batches of at most ``max_bytes`` per
        stream; the last batch (maybe empty) ends it, then the files are closed."""
        while self.tail.finish(max_bytes):
            yield self.tail.take()
        yield self.tail.take()
        self.tail.close(soon=True)  # the exit is sent next: its inotify close must not hold it up


class CapturedProcess(RankOutput):
    """One command started by a :class:`~.shell.RunShell`: ``popen`` (its group's leader: ``pid``
    is the group id), its rank ``folder`` and the :class:`~.tail.Tail` reading it.

    Reading and watching the exit are set up on the running loop by the first :meth:`batches`,
    :meth:`finish` or :meth:`stop`; before that :meth:`finish_now` may answer without any loop
    machinery (the cheap path of a short command)."""

    def __init__(self, popen: subprocess.Popen[bytes], folder: Path) -> None:
        super().__init__(folder)
        self.popen = popen
        self.pid = popen.pid
        self._exited: asyncio.Future[int] | None = None
        self._stopping: asyncio.Future[None] | None = None

    @property
    def returncode(self) -> int | None:
        """The exit status once reaped (negative: killed by that signal), else None."""
        return self.popen.returncode

    def _watch(self) -> None:
        """Start following the files and watching for the exit on the running loop (once)."""
        if self._exited is None:
            self._exited = _exit_future(self.popen)
        self.tail.watch()

    def finish_now(self, limit: float, on_output: Callable[[], None] | None = None) -> int | None:
        """The return code if the command (and everything in its group) ends within ``limit``
        and its output fits one message; else None. ``on_output()`` is called when it first
        printed (the caller sends that at once)."""
        if self.popen.poll() is None:

            def printed() -> bool:
                if not self.tail.written():
                    return False
                if on_output is not None:
                    on_output()
                return True

            _procfs.wait_exit(
                self.pid,
                limit,
                lambda: self.popen.poll() is not None,
                SLICE,
                printed if on_output is not None else None,
            )
            if self.popen.poll() is None:
                return None
        if _procfs.group_alive(self.pid):  # background children: the slow path
            return None
        self._ended()
        if self.tail.finish(LAST_BYTES):  # a flood: the rest goes in several messages (slow path)
            return None
        self.tail.close()
        return self.popen.returncode

    def _ended(self) -> None:
        if self.popen.returncode is not None and self.popen.returncode < 0:
            write_status(self.folder, self.popen.returncode)  # killed: the wrapper could not say

    async def finish(self, drain: float = DRAIN_AFTER_EXIT, grace: float = _procfs.GRACE) -> int:
        """Wait for the exit; background children still there ``drain`` s later get SIGTERM, then
        SIGKILL. Then :meth:`rest` hands out what is left in the files.
        Cancelled (the actor is going away), the run is left running: only the files are closed."""
        self._watch()
        assert self._exited is not None
        try:
            returncode = await asyncio.shield(self._exited)
            alive = self._group_alive
            if not await _procfs.wait_until_async(lambda: not alive(), drain):
                await _procfs.escalate_async(self._signal, alive, grace, (signal.SIGTERM, signal.SIGKILL))
            self.kill()
            self._ended()
        except BaseException:
            self.tail.close()
            raise
        return returncode

    async def stop(self, grace: float = _procfs.GRACE) -> None:
        """SIGINT → SIGTERM → SIGKILL to the group (``grace`` s apart) until no member is alive.
        Idempotent: a second call waits for the first escalation."""
        if self._stopping is None:
            self._watch()
            self._stopping = asyncio.ensure_future(
                _procfs.escalate_async(self._signal, self._group_alive, grace)
            )
        await asyncio.shield(self._stopping)

    def _signal(self, sig: int) -> bool:
        return _procfs.killpg(self.pid, sig)

    def _group_alive(self) -> bool:
        return _procfs.group_alive(self.pid)

    def kill(self) -> None:
        """SIGKILL the whole group now."""
        _procfs.killpg(self.pid, signal.SIGKILL)

    def close(self) -> None:
        """Kill the group and close the files (the exit is still watched, so it is reaped)."""
        self.kill()
        self.tail.close()


def _exit_future(popen: subprocess.Popen[bytes]) -> asyncio.Future[int]:
    """A future of ``popen``'s return code, set when it exits (woken by a pidfd, with no thread;
    without one, waited on a helper thread). It reaps the process even if no one awaits it."""
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[int] = loop.create_future()
    if popen.returncode is not None:  # reaped already (its pid may not be its own any more)
        exited.set_result(popen.returncode)
        return exited

    def reaped(returncode: int) -> None:
        if not exited.done():
            exited.set_result(returncode)

    pidfd = _procfs.open_pidfd(popen.pid)
    if pidfd is None:
        loop.run_in_executor(None, popen.wait).add_done_callback(lambda f: reaped(f.result()))
        return exited

    def ready() -> None:  # kept until the exit, so the process is reaped
        loop.remove_reader(pidfd)
        os.close(pidfd)
        reaped(popen.wait())

    loop.add_reader(pidfd, ready)
    return exited
