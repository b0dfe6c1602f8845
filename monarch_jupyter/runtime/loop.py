"""The one event loop that talks to Monarch.

Why a thread of our own instead of nest-asyncio: inside a kernel an asyncio
loop is always running on the main thread, so every Monarch ``Future.get()``
made there warns and blocks the kernel's own loop; nest-asyncio (archived
upstream) would let us re-enter that loop, but then a blocked Monarch call
still stalls the kernel and Ctrl-C cannot reach it. A dedicated daemon thread
owns one asyncio loop; kernel code hands it coroutines (``run``) or blocking
Monarch calls (``call``, executed one at a time on a helper thread with no
running loop, so ``.get()`` stays quiet) and waits in short slices, which keeps
the wait interruptible by KeyboardInterrupt.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

_POLL_SECONDS = 0.05


class EventLoopThread:
    """A daemon thread running one asyncio loop, plus one blocking-call worker."""

    def __init__(self, name: str = "monarch-jupyter-loop") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._blocking = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"{name}-blocking"
        )
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop, started on first use."""
        with self._lock:
            if self._loop is None:
                ready = threading.Event()
                loop = asyncio.new_event_loop()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=serve, name=self._name, daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def submit(self, coro: Awaitable[T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop and return a thread-safe future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]

    def run(self, coro: Awaitable[T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for it; Ctrl-C cancels it."""
        return wait(self.submit(coro), timeout)

    def call(self, fn: Callable[..., T], *args: Any, timeout: float | None = None) -> T:
        """Run blocking ``fn(*args)`` on the blocking worker and wait for it."""
        return wait(self._blocking.submit(fn, *args), timeout)


def wait(future: concurrent.futures.Future[T], timeout: float | None = None) -> T:
    """Wait for ``future`` in short slices so KeyboardInterrupt is seen at once.

    On interrupt or timeout the future is cancelled (a coroutine on the loop
    receives CancelledError) and the exception propagates.
    """
    deadline = None if timeout is None else _now() + timeout
    try:
        while True:
            slice_ = _POLL_SECONDS
            if deadline is not None:
                left = deadline - _now()
                if left <= 0:
                    raise TimeoutError(f"no answer within {timeout:g} s")
                slice_ = min(slice_, left)
            try:
                return future.result(timeout=slice_)
            except concurrent.futures.TimeoutError:
                continue
    except BaseException:
        future.cancel()
        raise


def _now() -> float:
    return time.monotonic()


_shared: EventLoopThread | None = None


def shared_loop() -> EventLoopThread:
    """The process-wide loop owner (one per kernel)."""
    global _shared
    if _shared is None:
        _shared = EventLoopThread()
    return _shared
