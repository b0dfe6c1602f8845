"""The live per-rank run grid: a widget over :class:`RunView`.

``RunWidget`` takes the ``RunView`` protocol calls (``rank_started``, ``lines``,
``rank_finished``, ``stopping``, ``finish``) on the kernel thread and sends at
most one batch per ``interval`` (50 ms): one state sync (changed tiles, summary)
plus one custom message with the new lines of every rank that printed. A timer
flushes the last batch when no further event comes.

The front end (``run.js``) keeps each rank's recent lines, draws one tile per rank
(status, return code, elapsed time, last line), shows the clicked rank's output
and filters to failing ranks — all in the browser, so it works while the cell
still runs (the kernel does not read widget messages until the cell ends). For
the same reason Stop interrupts the kernel through the server's REST API, exactly
as the toolbar's interrupt button does.

``RemoteRunObserver`` adapts ``%%remote``'s ``RunState`` observer interface
(``on_event(state, event)``) to this protocol; ``install(ipython)`` registers it.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import anywidget
import traitlets

from .run_model import RunView, Throttle

_HERE = Path(__file__).parent


def kernel_id() -> str:
    """This kernel's id as the Jupyter server knows it ('' outside a server-started kernel)."""
    try:
        from ipykernel.connect import get_connection_file

        name = Path(get_connection_file()).name
    except Exception:
        return ""
    match = re.fullmatch(r"kernel-(.+)\.json", name)
    return match.group(1) if match else ""


class RunWidget(anywidget.AnyWidget):
    """One tile per rank, updated live in batches."""

    _esm = _HERE / "run.js"
    _css = _HERE / "run.css"

    title = traitlets.Unicode("").tag(sync=True)
    summary = traitlets.Unicode("").tag(sync=True)
    tiles = traitlets.List().tag(sync=True)
    tails = traitlets.Dict().tag(sync=True)  # rank -> last lines, set at the end (for views opened later)
    finished = traitlets.Bool(False).tag(sync=True)
    stopping = traitlets.Unicode("").tag(sync=True)
    kernel_id = traitlets.Unicode("").tag(sync=True)
    # Front-end view state, kept in the model so a re-rendered view keeps it.
    selected = traitlets.Int(-1).tag(sync=True)
    failing_only = traitlets.Bool(False).tag(sync=True)

    def __init__(
        self,
        labels: Sequence[str] = (),
        title: str = "",
        view: RunView | None = None,
        interval: float = 0.05,
        start_timer: bool = True,
        clock: Callable[[], float] = time.monotonic,
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        self.view = view if view is not None else RunView(labels, title)
        self._throttle = Throttle(interval, clock)
        self._start_timer = start_timer
        self._timer: threading.Timer | None = None
        self._lock = threading.RLock()
        self._tile_list: list[dict] = []
        self._on_stop = on_stop
        self.batches = 0  # flushes so far (tests and benchmarks read it)
        super().__init__(title=self.view.title, kernel_id=kernel_id())
        self.on_msg(self._on_front_end_msg)
        self.flush()

    # ── the RunView protocol ──
    def rank_started(self, rank: int, label: str | None = None) -> None:
        with self._lock:
            self.view.rank_started(rank, label)
        self._changed()

    def lines(self, rank: int, lines: Iterable[tuple[str, str]]) -> None:
        with self._lock:
            self.view.lines(rank, lines)
        self._changed()

    def rank_finished(self, rank: int, status: str, returncode: int | None, duration: float | None,
                      error: str | None = None) -> None:
        with self._lock:
            self.view.rank_finished(rank, status, returncode, duration, error)
        self._changed()

    def stop_requested(self, reason: str = "interrupted") -> None:
        with self._lock:
            self.view.stopping(reason)
        self._changed()

    def finish(self, summary: str | None = None) -> None:
        """The run ended: flush now (no throttling) and refresh the display's text fallback."""
        with self._lock:
            self.view.finish(summary)
        self.flush()

    # ── batching ──
    def _changed(self) -> None:
        if self._throttle.due():
            self.flush()
        elif self._start_timer:
            with self._lock:
                if self._timer is None:
                    self._timer = threading.Timer(self._throttle.wait(), self._on_timer)
                    self._timer.daemon = True
                    self._timer.start()

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
        self.flush()

    def flush(self) -> bool:
        """Send what changed since the last flush as one sync (+ one lines message)."""
        with self._lock:
            batch = self.view.take()
            if batch is None:
                return False
            self._throttle.mark()
            self.batches += 1
            for tile in batch.tiles:
                rank = tile["rank"]
                while len(self._tile_list) <= rank:
                    self._tile_list.append({})
                self._tile_list[rank] = tile
            with self.hold_sync():
                if batch.tiles:
                    self.tiles = list(self._tile_list)
                self.summary = batch.summary
                self.stopping = self.view.stop_reason or ""
                if batch.finished and not self.finished:
                    self.tails = self.view.tails()
                    self.finished = True
            if batch.lines or batch.dropped:
                self.send(batch.to_json())
        return True

    # ── front end, display ──
    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("kind") == "stop" and self._on_stop is not None:
            self._on_stop()

    def close(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        super().close()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        data = super()._repr_mimebundle_(**kwargs)
        # A stable fallback: the run's result follows as its own output (text and
        # application/vnd.monarch.remote+json), so nothing here needs updating later.
        text = f"{self.view.title or '%%remote'}: live rank grid"
        if isinstance(data, tuple):  # (data, metadata)
            data[0]["text/plain"] = text
        elif isinstance(data, dict):
            data["text/plain"] = text
        return data


class RemoteRunObserver:
    """``%%remote`` observer: shows a RunWidget for each run and feeds it.

    ``on_event(state, event)`` is the ``RunState`` observer interface
    (``monarch_jupyter/remote/model.py``); events are told apart by class name
    (Started, Output, Exited, Lost, Stopping, Finished), lines are read from the
    rank's state after the model applied the event.
    """

    def __init__(self, show: Callable[[RunWidget], Any] | None = None, **widget_options: Any) -> None:
        self._show = show or _display
        self._options = widget_options
        self._state: Any = None
        self._seen: list[int] = []
        self.widget: RunWidget | None = None

    def on_event(self, state: Any, event: Any) -> None:
        if state is not self._state:
            self._begin(state)
        widget = self.widget
        kind = type(event).__name__
        index = getattr(event, "index", None)
        if kind == "Started":
            widget.rank_started(index, state.ranks[index].label)
        elif kind == "Output":
            self._new_lines(state, index)
        elif kind in ("Exited", "Lost"):
            self._new_lines(state, index)
            self._final(state, index)
        elif kind == "Stopping":
            widget.stop_requested(event.reason)
        elif kind == "Finished":
            for i in range(len(state.ranks)):
                self._new_lines(state, i)
                self._final(state, i)
            widget.finish(state.summary_line())

    def _begin(self, state: Any) -> None:
        self._state = state
        self._seen = [0] * len(state.ranks)
        self.widget = RunWidget([r.label for r in state.ranks], title=f"%%remote {state.target}", **self._options)
        self._show(self.widget)

    def _new_lines(self, state: Any, index: int) -> None:
        rank = state.ranks[index]
        new = rank.total_lines - self._seen[index]
        if new <= 0:
            return
        self._seen[index] = rank.total_lines
        kept = list(rank.lines)
        self.widget.lines(index, kept[-min(new, len(kept)):] if kept else [])

    def _final(self, state: Any, index: int) -> None:
        rank = state.ranks[index]
        if rank.done:
            self.widget.rank_finished(index, rank.status, rank.returncode, rank.duration, rank.error)


def _display(widget: RunWidget) -> None:
    from IPython.display import display

    display(widget)


def install(ipython: Any) -> RemoteRunObserver | None:
    """Show a live RunWidget for every ``%%remote`` run in this kernel (idempotent)."""
    magics = ipython.magics_manager.registry.get("RemoteMagics")
    if magics is None or not hasattr(magics, "observers"):
        return None
    for observer in magics.observers:
        if isinstance(observer, RemoteRunObserver):
            return observer
    observer = RemoteRunObserver()
    magics.observers.append(observer)
    return observer
