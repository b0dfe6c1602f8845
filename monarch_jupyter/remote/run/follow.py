"""A detached run's live grid while the kernel lives: events applied between cells.

``%%remote --detach`` returns at once, so no cell pumps the run's events. A
:class:`BackgroundFollow` does it instead: a follow drive (``RemoteRunner.follow``)
puts the run's events in a queue on the owned loop, and :meth:`BackgroundFollow.tick`
applies them to the run's ``RunState`` on the kernel thread — scheduled with the
kernel's own event loop (``kernel.io_loop.call_later``), so it runs only while no cell
runs, and only the kernel thread touches the run model and its widgets. While a cell
runs, events wait in the queue; a flood then is bounded (:data:`QUEUE_LIMIT` output
events; the rest are counted, not kept: the run's files on its hosts have every byte).

No IPython, no Monarch: the scheduler and the drive are handed in.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..view.model import Event, Finished, Output, RunState
from .drive import RunHandle

INTERVAL = 0.05  # seconds between ticks (the grid sends at most one batch per 50 ms anyway)
QUEUE_LIMIT = 20_000  # output events kept waiting for the kernel thread; more are dropped and counted
TICK_BUDGET = 0.02  # seconds of event applying per tick: the kernel stays responsive


class BoundedSink:
    """The drive's sink: a queue that stops keeping output events beyond ``limit`` (every
    other event — exits, losses, the end — is always kept)."""

    def __init__(self, limit: int = QUEUE_LIMIT) -> None:
        self.queue: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self.limit = limit
        self.dropped = 0  # output events not kept

    def put(self, event: Event) -> None:
        if type(event) is Output and self.queue.qsize() >= self.limit:
            self.dropped += 1
            return
        self.queue.put(event)


@dataclass(eq=False)
class BackgroundFollow:
    """Applies a followed run's events to ``state`` on the kernel thread, tick by tick."""

    state: RunState
    sink: BoundedSink
    handle: RunHandle
    call_later: Callable[[float, Callable[[], None]], Any]  # the kernel loop's scheduler
    interval: float = INTERVAL
    clock: Callable[[], float] = time.monotonic
    ticks: int = field(default=0, init=False)

    def start(self) -> None:
        self.call_later(0, self.tick)

    def tick(self) -> None:
        """Apply what arrived (for at most TICK_BUDGET), let observers send; re-arm until the end."""
        state = self.state
        try:
            self.ticks += 1
            deadline = self.clock() + TICK_BUDGET
            while not state.finished and self.clock() < deadline:
                try:
                    event = self.sink.queue.get_nowait()
                except queue.Empty:
                    future = self.handle.future
                    if future is not None and future.done():  # the drive ended without telling
                        exc = future.exception() if not future.cancelled() else None
                        state.apply(Finished(f"following the run ended unexpectedly: {exc}"))
                    break
                state.apply(event)
            if not state.finished:
                for observer in state.observers:
                    on_tick = getattr(observer, "on_tick", None)
                    if on_tick is not None:
                        on_tick(state)
        except KeyboardInterrupt:  # an interrupt of the idle kernel (the grid's Stop) landed here
            pass
        if not state.finished:
            self.call_later(self.interval, self.tick)

    def stop(self) -> None:
        """Stop following (the run goes on)."""
        self.handle.stop("unfollowed")
