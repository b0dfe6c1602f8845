"""Tailing a rank's ``out`` and ``err`` files, woken by inotify; the head of a big file punched out.

Output comes as :class:`~..protocol.Chunk` s: text as read, not lines, so partial lines and
``\\r`` progress bars flow; UTF-8 decoded incrementally (a character split across two reads stays
whole); ``newlines`` counted on the bytes, so no one rescans a flood. A rank folder keeps at most
``MAX_KEEP`` bytes per stream: older bytes are punched out (the file stays sparse, offsets stay
valid) by whoever is reading it on that host.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import ctypes
import os
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ...system.procfs import POLL
from ..wire.protocol import ERR, OUT, Chunk
from ..wire.protocol import FLUSH_EVERY as FLUSH_EVERY  # at most one batch this often …

BATCH_BYTES = 1 << 20  # … unless this much is waiting
HEARTBEAT = 0.5  # an empty batch after this long without output
READ_SIZE = 1 << 20
MAX_KEEP = 64 << 20  # bytes kept per stream and rank on the host (older bytes punched out)
REPLAY_BYTES = 256 << 10  # what an attach replays per stream before following, at most …
REPLAY_LINES = 200  # … and at most this many lines (the cell's live budget stays for what comes next)
LAST_BYTES = 1 << 20  # per stream and message once the command ended (a flood's rest: several messages)
BOUND_EVERY = 2.0  # seconds between bound checks while tailing
_IN_MODIFY = 0x2


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


class Libc:
    """inotify and ``fallocate`` through libc (ctypes), loaded on first use; one per process
    (:data:`libc`): the library handle is process-wide by nature."""

    def __init__(self) -> None:
        self._handle: Any = None  # None: not loaded yet; False: not available

    def __reduce__(self) -> tuple[type, tuple[()]]:  # travels to a worker unloaded
        return (type(self), ())

    def _lib(self) -> Any:
        if self._handle is None:
            try:
                lib = ctypes.CDLL(None, use_errno=True)
                lib.inotify_init1, lib.inotify_add_watch, lib.fallocate  # noqa: B018 (present?)
                lib.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
                self._handle = lib
            except (OSError, AttributeError):
                self._handle = False
        return self._handle

    def inotify_fd(self, paths: list[Path]) -> int | None:
        """A non-blocking inotify fd watching ``paths`` for writes, or None (then poll)."""
        lib = self._lib()
        if not lib:
            return None
        fd = lib.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return None
        for path in paths:
            if lib.inotify_add_watch(fd, os.fsencode(str(path)), _IN_MODIFY) < 0:
                os.close(fd)
                return None
        return fd

    def punch_head(self, fd: int, keep: int = MAX_KEEP) -> int:
        """Free all but the last ``keep`` bytes of the file (a hole: size and offsets stay); the
        offset where kept data starts."""
        size = os.fstat(fd).st_size
        cut = (size - keep) // 4096 * 4096
        if cut <= 0:
            return 0
        lib = self._lib()
        if lib:
            lib.fallocate(fd, 0x02 | 0x01, 0, cut)  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
        return cut


class Closer:
    """Closes inotify fds on one helper thread (made on first use; one per process:
    :data:`closer`): such a close waits for an RCU grace period (up to milliseconds on a busy
    host), which must not hold up an answer."""

    def __init__(self) -> None:
        self._thread: ThreadPoolExecutor | None = None

    def __reduce__(self) -> tuple[type, tuple[()]]:  # travels to a worker without its thread
        return (type(self), ())

    def close_soon(self, fd: int) -> None:
        """Close ``fd`` on the helper thread once the running loop (if any) is through with what
        it is doing (answering a run)."""
        try:
            asyncio.get_running_loop().call_soon(self._close_on_thread, fd)
        except RuntimeError:  # no loop
            self._close_on_thread(fd)

    def _close_on_thread(self, fd: int) -> None:
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="monarch-jupyter-close")
        try:
            self._thread.submit(os.close, fd)
        except RuntimeError:  # interpreter shutting down
            os.close(fd)


libc = Libc()
closer = Closer()


class _Stream:
    __slots__ = ("bounded_at", "decoder", "fd", "path", "sink", "skipped", "stream")

    def __init__(self, stream: str, path: Path, offset: int | None, lines: int | None = None) -> None:
        self.stream = stream
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.sink: IO[bytes] | None = None
        self.bounded_at = 0.0
        size = os.fstat(self.fd).st_size
        start = 0 if offset is None else max(0, size - offset)
        if offset is not None and start > 0:  # replay from the start of a line
            os.lseek(self.fd, start - 1, os.SEEK_SET)
            head = os.read(self.fd, 1 << 16)
            cut = head.find(b"\n")
            start = start + cut if cut >= 0 else start - 1 + len(head)
        if lines is not None and size > start:  # … and only the last ``lines`` lines of that
            window = os.pread(self.fd, size - start, start)
            end = len(window) - 1 if window.endswith(b"\n") else len(window)
            for _ in range(lines):
                end = window.rfind(b"\n", 0, end)
                if end < 0:
                    break
            if end >= 0:
                start += end + 1
        with contextlib.suppress(OSError):  # skip a punched-out head (ENXIO: no data after start)
            start = max(start, os.lseek(self.fd, start, os.SEEK_DATA))
        os.lseek(self.fd, start, os.SEEK_SET)
        self.skipped = start  # bytes not replayed


@dataclass(slots=True)
class _Pending:
    """One stream's text read since the last take, in pieces: one Chunk when taken."""

    stream: str
    texts: list[str]
    newlines: int


class Tail:
    """Follows a rank's ``out`` and ``err`` files: :class:`~..protocol.Chunk` batches as they grow.

    ``replay``: None reads from the beginning; a byte count starts that far from the end (at a line
    start), and ``lines`` keeps only that many lines of it. Woken by inotify (polls when there is none). Call :meth:`close` when done: it frees
    every fd.
    """

    def __init__(self, folder: Path, replay: int | None = None, lines: int | None = None) -> None:
        self.folder = folder
        self.streams: list[_Stream] = []
        try:
            for name in (OUT, ERR):
                self.streams.append(_Stream(name, folder / name, replay, lines))
        except OSError:
            self.close()
            raise
        self._batch: list[_Pending] = []
        self._size = 0
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._notify: int | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._paused = False
        self.closed = False

    @property
    def skipped(self) -> int:
        return sum(s.skipped for s in self.streams)

    def tee(self, out: IO[bytes] | None, err: IO[bytes] | None) -> None:
        self.streams[0].sink, self.streams[1].sink = out, err

    def _feed(self, s: _Stream, data: bytes, final: bool = False) -> None:
        if s.sink is not None and data:
            s.sink.write(data)
        text = s.decoder.decode(data, final=final)
        if text:
            batch = self._batch
            if batch and batch[-1].stream == s.stream:
                batch[-1].texts.append(text)
                batch[-1].newlines += data.count(b"\n")
            else:
                batch.append(_Pending(s.stream, [text], data.count(b"\n")))
            self._size += len(text)
            self._wake.set()

    def read(self, limit: int = READ_SIZE) -> bool:
        """Read what the files hold now (up to ``limit`` bytes each); True if more is waiting."""
        more = False
        for s in self.streams:
            got = 0
            while got < limit:
                try:
                    data = os.read(s.fd, READ_SIZE)
                except OSError:
                    break
                if not data:
                    break
                got += len(data)
                self._feed(s, data)
            else:
                more = True
        return more

    def _bound(self) -> None:
        now = time.monotonic()
        for s in self.streams:
            if now - s.bounded_at > BOUND_EVERY:
                s.bounded_at = now
                try:
                    if os.fstat(s.fd).st_size > MAX_KEEP + (1 << 20):
                        wfd = os.open(s.path, os.O_WRONLY | os.O_CLOEXEC)
                        try:
                            cut = libc.punch_head(wfd)
                        finally:
                            os.close(wfd)
                        if os.lseek(s.fd, 0, os.SEEK_CUR) < cut:
                            os.lseek(s.fd, cut, os.SEEK_SET)
                except OSError:
                    pass

    def _readable(self) -> None:
        if self._notify is not None:
            try:
                while os.read(self._notify, 4096):
                    pass
            except OSError:
                pass
        if self.closed or self._loop is None:  # closed, or not watched (it runs only under watch)
            return
        if self._size >= LAST_BYTES:  # the reader has not taken the last batch: wait for it
            self._paused = True
            return
        if self.read():
            self._loop.call_soon(self._readable)
        self._bound()

    def _tick(self) -> None:
        self._timer = None
        self._readable()
        if not self.closed and self._loop is not None:
            self._timer = self._loop.call_later(POLL, self._tick)

    def notify_fd(self) -> int | None:
        """The inotify fd that wakes on writes to the files (created now if need be; :meth:`watch`
        then uses it), or None where there is no inotify."""
        if self._notify is None and not self.closed:
            self._notify = libc.inotify_fd([s.path for s in self.streams])
        return self._notify

    def written(self) -> bool:
        """Whether a file holds bytes not read yet (cheap: one fstat per stream)."""
        for s in self.streams:
            try:
                if os.fstat(s.fd).st_size > os.lseek(s.fd, 0, os.SEEK_CUR):
                    return True
            except OSError:
                pass
        return False

    def watch(self) -> None:
        """Start following on the running loop (once)."""
        if self._loop is not None or self.closed:
            return
        self._loop = asyncio.get_running_loop()
        self.notify_fd()
        if self._notify is not None:
            self._loop.add_reader(self._notify, self._readable)
        else:
            self._timer = self._loop.call_later(POLL, self._tick)
        self._readable()  # what was written before the watch

    def take(self) -> list[Chunk]:
        if not self._batch:
            return []
        chunks = [Chunk(p.stream, "".join(p.texts), p.newlines) for p in self._batch]
        self._batch, self._size = [], 0
        if self._paused and self._loop is not None and not self.closed:
            self._paused = False
            self._loop.call_soon(self._readable)
        return chunks

    def batches(self, every: float, max_bytes: int, quiet: float) -> AsyncIterator[list[Chunk]]:
        """Output as it comes: at most one batch every ``every`` seconds (sooner once
        ``max_bytes`` wait), ``[]`` after ``quiet`` seconds without any (a heartbeat). Runs until
        cancelled; what arrives after the last batch is left for :meth:`take`."""
        self.watch()
        return paced(self._wake, lambda: self._size, self.take, every, max_bytes, quiet)

    def finish(self, max_bytes: int | None = None) -> bool:
        """Read to the end now (at most ``max_bytes`` per stream: then True, call again after
        taking the batch) and flush the decoders (a last partial character)."""
        if max_bytes is not None:
            if self.read(max_bytes):
                return True
        else:
            while self.read():
                pass
        for s in self.streams:
            self._feed(s, b"", final=True)
        return False

    def close(self, soon: bool = False) -> None:
        """Free every fd; ``soon``: the inotify fd on a helper thread a moment later (see
        :meth:`Closer.close_soon`), for a caller about to answer."""
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._notify is not None:
            if self._loop is not None:
                self._loop.remove_reader(self._notify)
            (closer.close_soon if soon else os.close)(self._notify)
            self._notify = None
        for s in self.streams:
            if s.fd >= 0:
                os.close(s.fd)
                s.fd = -1
