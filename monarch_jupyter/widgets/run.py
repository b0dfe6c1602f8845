"""The live per-rank run grid: a view of one ``%%remote`` run's ``RunState``.

``RunWidget`` observes the run model (``on_event(state, event)`` after each
event, ``on_tick(state)`` from the magic between events, both on the kernel
thread) and sends what changed at most once per ``interval`` (50 ms): one state
sync (tiles, summary) plus one custom message with the new lines of every rank
that printed (:class:`~.run_model.GridSync` works out what changed). The end of
the run is sent at once. It keeps no facts of its own.

The front end (``run.js``) keeps each rank's recent lines, draws one tile per rank
(status, return code, elapsed time, last line), shows the clicked rank's output
and filters to failing ranks — all in the browser, so it works while the cell
still runs (the kernel does not read widget messages until the cell ends). For
the same reason Stop interrupts the kernel through the server's REST API, exactly
as the toolbar's interrupt button does.

``widgets.RemoteRunObserver`` (installed once per kernel) builds and shows a
``RunWidget`` only for a run that lasts; a short run shows none.
"""

from __future__ import annotations

import hashlib
import html
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ..remote.model import Event, RunState
from .run_model import GridSync, Throttle, Tile, sync_interval, tails

_HERE = Path(__file__).parent
RUN_JS = _HERE / "run.js"
RUN_CSS = _HERE / "run.css"


def code_version() -> str:
    """A digest of run.js and run.css: the loader's cache-busting query (new code, new URL)."""
    return hashlib.sha256(RUN_JS.read_bytes() + RUN_CSS.read_bytes()).hexdigest()[:12]


def _stub() -> str:
    """The loader saved as each grid's ``_esm`` (run_stub.js): it fetches run.js and run.css
    from the server extension, or asks this widget for them (:meth:`RunWidget._on_front_end_msg`)."""
    text = (_HERE / "run_stub.js").read_text().replace("__VERSION__", code_version())
    lines = (line.strip() for line in text.splitlines())  # saved once per grid: no comments
    return "\n".join(line for line in lines if line and not line.startswith(("//", "/**")))


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
    """One tile per rank of ``state``, updated live in batches (an observer of the run)."""

    # A loader, not the code: a saved notebook carries ~2 KB per grid, not run.js + run.css.
    _esm = _stub()
    _css = ""

    title = traitlets.Unicode("").tag(sync=True)
    summary = traitlets.Unicode("").tag(sync=True)
    tiles: traitlets.List[Tile] = traitlets.List().tag(sync=True)
    tails = traitlets.Dict().tag(sync=True)  # rank -> last lines: what a view rendered now starts from
    finished = traitlets.Bool(False).tag(sync=True)
    stopping = traitlets.Unicode("").tag(sync=True)
    kernel_id = traitlets.Unicode("").tag(sync=True)
    # A detached run's grid: the kernel is idle, so Stop is a message to it (stop the run),
    # not an interrupt of a running cell.
    detached = traitlets.Bool(False).tag(sync=True)
    # Front-end view state, kept in the model so a re-rendered view keeps it.
    selected = traitlets.Int(-1).tag(sync=True)
    failing_only = traitlets.Bool(False).tag(sync=True)

    def __init__(
        self,
        state: RunState,
        title: str = "",
        interval: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        self.state: RunState | None = state
        self._sync = GridSync(state, seen_lines=True)  # the lines so far go in `tails`
        self._throttle = Throttle(sync_interval(len(state.ranks), interval), clock)
        self._on_stop = on_stop
        self.batches = 0  # flushes so far (tests and benchmarks read it)
        super().__init__(title=title, kernel_id=kernel_id(), tails=tails(state))
        self.on_msg(self._on_front_end_msg)
        self.flush()

    # ── observing the run ──
    def on_event(self, state: RunState, event: Event) -> None:
        if state is not self.state:
            return
        if state.finished or self._throttle.due():
            self.flush()

    def on_tick(self, state: RunState) -> None:
        """Between events: send the last batch once the interval has passed."""
        if state is self.state and self._throttle.due():
            self.flush()

    def flush(self) -> bool:
        """Send what changed since the last flush as one sync (+ one lines message)."""
        state = self.state
        if state is None:
            return False
        batch = self._sync.take()
        if batch is None:
            return False
        self._throttle.mark()
        self.batches += 1
        with self.hold_sync():
            if batch.tiles is not None:
                self.tiles = batch.tiles
            self.summary = batch.summary
            self.stopping = batch.stopping
            if batch.finished:
                self.tails = tails(state)
                self.finished = True
        message = batch.message()
        if message is not None:
            self.send(message)
        if batch.finished:  # everything is sent: let the run (and its output) go
            self.state = None
        return True

    # ── front end, display ──
    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        kind = content.get("kind") if isinstance(content, dict) else None
        if kind == "stop" and self._on_stop is not None:
            self._on_stop()
        elif kind == "code":  # a front end without the server extension: the code, unsaved
            self.send({"kind": "code", "esm": RUN_JS.read_text(), "css": RUN_CSS.read_text()})

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        data = super()._repr_mimebundle_(**kwargs)
        # A stable fallback: the run's result follows as its own output (text and
        # application/vnd.monarch.remote+json), so nothing here needs updating later.
        bundle = data[0] if isinstance(data, tuple) else data  # (data, metadata) or data
        if bundle is not None:  # None: a widget without a view name (ipywidgets shows nothing)
            bundle.update(fallback_bundle(self.title))
        return data


def fallback_text(title: str) -> str:
    """The text/plain of the grid: a header line for the streamed lines in text
    front ends (the run's result follows as its own output)."""
    return title or "%%remote"


def fallback_bundle(title: str) -> dict[str, str]:
    """text/plain and text/html of the grid."""
    text = fallback_text(title)
    return {"text/plain": text, "text/html": f"<b>{html.escape(text)}</b>"}
