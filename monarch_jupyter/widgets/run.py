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

import html
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
        if view is not None:  # shown late: the front end starts from what came before
            self.tails = self.view.tails()
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
        bundle = data[0] if isinstance(data, tuple) else data  # (data, metadata) or data
        bundle.update(fallback_bundle(self.view.title))
        return data


#: A run shorter than this stays plain text: building and opening the widget costs
#: ~8 ms, most of a warm ``%remote true``, and a grid that flashes once tells nothing.
SHOW_AFTER = 0.3


class _PendingView:
    """Takes the RunWidget calls on a bare RunView until the widget is worth showing."""

    def __init__(self, view: RunView) -> None:
        self.view = view

    def rank_started(self, rank: int, label: str | None = None) -> None:
        self.view.rank_started(rank, label)

    def lines(self, rank: int, lines: Iterable[tuple[str, str]]) -> None:
        self.view.lines(rank, lines)

    def rank_finished(self, rank: int, status: str, returncode: int | None, duration: float | None,
                      error: str | None = None) -> None:
        self.view.rank_finished(rank, status, returncode, duration, error)

    def stop_requested(self, reason: str = "interrupted") -> None:
        self.view.stopping(reason)

    def finish(self, summary: str | None = None) -> None:
        self.view.finish(summary)


class RemoteRunObserver:
    """``%%remote`` observer: shows a RunWidget for each run that lasts and feeds it.

    ``on_event(state, event)`` is the ``RunState`` observer interface
    (``monarch_jupyter/remote/model.py``); events are told apart by class name
    (Started, Output, Exited, Lost, Stopping, Finished), lines are read from the
    rank's state after the model applied the event. ``on_tick(state)`` is called
    by the magic between events, so a silent run still gets its grid.

    At the start of a run it displays a one-line placeholder; once the run has
    lasted ``show_after`` seconds the placeholder is replaced in place by the
    widget, which starts from everything seen so far. Both carry the same
    text/plain, so saved notebooks and nbval read the same line either way.
    """

    def __init__(
        self,
        show: Callable[[RunWidget], Any] | None = None,
        placeholder: Callable[[str], Any] | None = None,
        show_after: float = SHOW_AFTER,
        clock: Callable[[], float] = time.monotonic,
        **widget_options: Any,
    ) -> None:
        self._show = show
        self._placeholder = placeholder or _display_placeholder
        self._show_after = show_after
        self._clock = clock
        self._options = widget_options
        self._state: Any = None
        self._seen: list[int] = []
        self._began = 0.0
        self._title = ""
        self._handle: Any = None
        self._target: Any = None
        self.widget: RunWidget | None = None

    def on_event(self, state: Any, event: Any) -> None:
        if state is not self._state:
            self._begin(state)
        kind = type(event).__name__
        if kind != "Finished":
            self.on_tick(state)
        target = self._target
        index = getattr(event, "index", None)
        if kind == "Started":
            target.rank_started(index, state.ranks[index].label)
        elif kind == "Output":
            self._new_lines(state, index)
        elif kind in ("Exited", "Lost"):
            self._new_lines(state, index)
            self._final(state, index)
        elif kind == "Stopping":
            target.stop_requested(event.reason)
        elif kind == "Finished":
            for i in range(len(state.ranks)):
                self._new_lines(state, i)
                self._final(state, i)
            target.finish(state.summary_line())

    def on_tick(self, state: Any) -> None:
        """Swap the placeholder for the live widget once the run has lasted."""
        if state is not self._state or self.widget is not None:
            return
        if self._clock() - self._began < self._show_after:
            return
        self.widget = RunWidget(title=self._title, view=self._target.view, **self._options)
        self._target = self.widget
        if self._show is not None:
            self._show(self.widget)
        elif self._handle is not None:
            self._handle.update(self.widget)

    def _begin(self, state: Any) -> None:
        self._state = state
        self._seen = [0] * len(state.ranks)
        self._began = self._clock()
        self._title = f"%%remote {state.target}"
        self._target = _PendingView(RunView([r.label for r in state.ranks], self._title))
        self.widget = None
        self._handle = self._placeholder(self._title)
        self.on_tick(state)

    def _new_lines(self, state: Any, index: int) -> None:
        rank = state.ranks[index]
        new = rank.total_lines - self._seen[index]
        if new <= 0:
            return
        self._seen[index] = rank.total_lines
        kept = list(rank.lines)
        self._target.lines(index, kept[-min(new, len(kept)):] if kept else [])

    def _final(self, state: Any, index: int) -> None:
        rank = state.ranks[index]
        if rank.done:
            self._target.rank_finished(index, rank.status, rank.returncode, rank.duration, rank.error)


def fallback_text(title: str) -> str:
    """The text/plain of the grid and of its placeholder: a header line for the streamed
    lines in text front ends (the run's result follows as its own output)."""
    return title or "%%remote"


def fallback_bundle(title: str) -> dict[str, str]:
    """text/plain and text/html of the grid and of its placeholder."""
    text = fallback_text(title)
    return {"text/plain": text, "text/html": f"<b>{html.escape(text)}</b>"}


def _display_placeholder(title: str) -> Any:
    from IPython.display import display

    return display(fallback_bundle(title), raw=True, display_id=True)


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
