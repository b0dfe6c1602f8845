"""The live per-rank run grid: a view of one ``%%remote`` run's ``RunState``.

``RunWidget`` observes the run model (``on_event(state, event)`` after each
event, ``on_tick(state)`` from the magic between events, both on the kernel
thread) and sends what changed at most once per ``interval`` (50 ms): one state
sync (tiles, summary) plus one custom message with the new lines of every rank
that printed (:class:`~.run_model.GridSync` works out what changed). The end of
the run is sent at once. It keeps no facts of its own.

The front end (``run.js``) keeps each rank's recent lines, draws one tile per rank
(status, return code, elapsed time, last line) or per group of ranks whose output is
identical so far (:mod:`.grid_fold`), shows the clicked rank's output and filters to
failing ranks, all in the browser. Stop interrupts the kernel through the server's
REST API, exactly as the toolbar's interrupt button does. A tile's Stacks button and
the resources shown while the grid is visible are requests to this widget, served on
a thread of their own while the cell runs (:mod:`.busy_comm`).

``widgets.RemoteRunObserver`` (installed once per kernel) builds and shows a
``RunWidget`` only for a run that lasts; a short run shows none.
"""

from __future__ import annotations

import hashlib
import html
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..remote.view.model import Event, RunState
from .busy_comm import Request, Served, serve_while_busy
from .code import read_code
from .comm_model import Model, Synced
from .grid_fold import GridFold, Group
from .run_model import PAGE, GridSync, Throttle, Tile, View, sync_interval

#: ``stacks(run_id, ranks)``: the folded stacks text of these flat ranks (``%remote stacks``)
StacksFn = Callable[[str, list[int]], str]
#: ``usage(run_id)``: the run's samples (``host.usage``), each with ``idle`` (``remote.resources``)
UsageFn = Callable[[str], Sequence[Mapping[str, object]]]
GROUP_FROM = 8  # a grid of more ranks than this starts grouped (a smaller one shows every rank)
USAGE_EVERY = 1.0  # seconds: at most one resources sample this often
REQUESTS = ("stacks", "usage", "code")
_HERE = Path(__file__).parent
RUN_JS = _HERE / "run.js"
RUN_CSS = _HERE / "run.css"


def code_version() -> str:
    """A digest of run.js and run.css: the loader's cache-busting query (new code, new URL)."""
    return hashlib.sha256((read_code(RUN_JS) + read_code(RUN_CSS)).encode()).hexdigest()[:12]


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


class RunWidget(Model):
    """One tile per rank of ``state``, updated live in batches (an observer of the run)."""

    # A loader, not the code: a saved notebook carries ~2 KB per grid, not run.js + run.css.
    _esm = _stub()
    _css = ""

    title = Synced("")
    summary = Synced("")
    # the tiles the view draws (a page, or one per group: GridSync's View), not every rank's
    tiles: Synced[list[Tile]] = Synced([])
    tile_count = Synced(0)  # tiles in the view's whole order (for "more")
    detail: Synced[dict[str, Any] | None] = Synced(None)  # selected, not drawn
    tails: Synced[dict[str, Any]] = Synced({})  # rank -> last lines: what a view rendered now starts from
    finished = Synced(False)
    stopping = Synced("")
    kernel_id = Synced("")
    # A detached run's grid: the kernel is idle, so Stop is a message to it (stop the run),
    # not an interrupt of a running cell.
    detached = Synced(False)
    # Front-end view state, kept in the model so a re-rendered view keeps it.
    selected = Synced(-1)
    failing_only = Synced(False)
    grouped = Synced(False)
    limit = Synced(PAGE)  # tiles drawn at most (grows with "more")
    groups: Synced[list[Group]] = Synced([])  # grid_fold.Group dicts, failing first
    # which requests this kernel answers (a Stacks button, resources on the tiles)
    can_stacks = Synced(False)
    can_usage = Synced(False)
    # set by a view once it has rendered: from then on the lines are the grid's, not the stream's
    shown = Synced(False)

    def __init__(
        self,
        state: RunState,
        title: str = "",
        interval: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
        on_stop: Callable[[], None] | None = None,
        stacks: StacksFn | None = None,
        usage: UsageFn | None = None,
        bounded: bool | None = None,
    ) -> None:
        """``bounded``: send only what the view draws (None: where the kernel tells this widget
        of the view's changes while a cell runs, i.e. :func:`.busy_comm.serve_while_busy` hooked)."""
        self.state: RunState | None = state
        self._clock = clock
        self._fold = GridFold(state.ranks, clock())
        self._seeded: object = state.last_fed  # the lines of the event being applied are in the seed already
        self._sync = GridSync(state, seen_lines=True, fold=self._fold)  # the lines so far go in `tails`
        self._throttle = Throttle(sync_interval(len(state.ranks), interval), clock)
        self._on_stop = on_stop
        self._stacks, self._usage = stacks, usage
        self._run_id = state.run_id or ""
        self._points = [(r.mesh, r.rank) for r in state.ranks]  # tile index -> (mesh, flat rank)
        self._served = Served()
        self._usage_lock = threading.Lock()
        self._usage_at = float("-inf")
        self.batches = 0  # flushes so far (tests and benchmarks read it)
        self.busy_served = False  # requests are read while a cell runs (busy_comm)
        self._sent_view: View | None = None
        self._opened = False  # the first flush's tails go in the `tails` trait (no view yet)
        self._view_shown = False  # a view said so while a cell ran (read on the shell thread)
        super().__init__(
            title=title,
            kernel_id=kernel_id(),
            grouped=len(state.ranks) > GROUP_FROM,
            can_stacks=stacks is not None and bool(self._run_id),
            can_usage=usage is not None and bool(self._run_id),
        )
        self.on_msg(self._on_front_end_msg)
        self.busy_served = serve_while_busy(self.comm, self._is_request, self._serve, self._on_update)
        if bounded if bounded is not None else self.busy_served:
            self._sync.view = self._view()
            self.observe(self._on_view, names=["grouped", "failing_only", "limit", "selected"])
        self.flush()

    # ── the view (what the front end draws) ──
    def _view(self, changes: Mapping[str, Any] | None = None) -> View:
        values = {k: getattr(self, k) for k in ("grouped", "failing_only", "limit", "selected")}
        for key, value in (changes or {}).items():
            if key in values and isinstance(value, type(values[key])):
                values[key] = value
        return View(
            bool(values["grouped"]),
            bool(values["failing_only"]),
            max(1, int(values["limit"])),
            int(values["selected"]),
        )

    def _on_update(self, changes: Mapping[str, Any]) -> None:
        """A state update from the front end, read on the shell-channel thread (the cell may be
        running): the next flush sends what the new view draws."""
        if changes.get("shown") is True:
            self._view_shown = True
        view = self._sync.view
        if view is None or not any(k in changes for k in ("grouped", "failing_only", "limit", "selected")):
            return
        merged = {**view.__dict__, **{k: v for k, v in changes.items() if k in view.__dict__}}
        self._sync.view = self._view(merged)

    def _on_view(self, _change: Any) -> None:
        """The view's traits changed on the main thread (no cell is running): send it now."""
        self._sync.view = self._view()
        if self.state is not None:
            self.flush()
        elif self.finished:  # after the run: the sync still reads its last state
            self._flush()

    @property
    def view_shown(self) -> bool:
        """A view of this grid rendered in a front end (it told the kernel)."""
        return self._view_shown or bool(self.shown)

    # ── observing the run ──
    def on_event(self, state: RunState, event: Event) -> None:
        if state is not self.state:
            return
        now = self._clock()  # one reading for the fold and the throttle (this runs per event)
        fed = state.last_fed
        if fed and fed is not self._seeded:
            self._fold.add(fed, now)
        self._seeded = None
        throttle = self._throttle
        if state.finished or now >= throttle.last + throttle.interval:
            self.flush()

    def on_tick(self, state: RunState) -> None:
        """Between events: send the last batch once the interval has passed (or the view changed)."""
        if state is self.state and (self._throttle.due() or self._sync.view is not self._sent_view):
            self.flush()

    def flush(self) -> bool:
        """Send what changed since the last flush as one sync (+ one lines message)."""
        state = self.state
        if state is None:
            return False
        self._fold.tick(self._clock())
        return self._flush()

    def _flush(self) -> bool:
        self._sent_view = self._sync.view
        batch = self._sync.take()
        self._throttle.mark()  # at most one look per interval, found something or not
        if batch is None:
            return False
        self.batches += 1
        message = batch.message()
        with self.hold_sync():
            if batch.tiles is not None:
                self.tiles = batch.tiles
                self.tile_count = batch.tiles_total
            if batch.detail_changed:
                self.set_trait("detail", batch.detail)
            if batch.groups is not None:
                self.groups = batch.groups
            self.summary = batch.summary
            self.stopping = batch.stopping
            if not self._opened:  # no view yet: the followed ranks' tails are what it starts from
                self.tails = {str(rank): lines for rank, lines in batch.tails.items()}
                self._opened, message = True, None
            elif batch.finished:  # what a view rendered later starts from
                self.tails = self._sync.followed_tails()
            if batch.finished:
                self.finished = True
        if message is not None:
            self.send(message)
        if batch.finished:  # everything is sent: the run's observers let it go
            self.state = None
        return True

    # ── front end, display ──
    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        kind = content.get("kind") if isinstance(content, dict) else None
        if self._is_request(content):
            threading.Thread(target=self._serve, args=(content,), daemon=True).start()
        elif kind == "stop" and self._on_stop is not None:
            self._on_stop()
        elif kind == "code":  # a loader saved before code requests had ids: answered after the cell
            self.send({"kind": "code", **_code()})

    # ── requests (any thread: busy_comm's, or the main thread's once the cell is done) ──
    @staticmethod
    def _is_request(content: object) -> bool:
        return (
            isinstance(content, Mapping)
            and content.get("kind") in REQUESTS
            and isinstance(content.get("id"), str)
        )

    def _serve(self, content: Request) -> None:
        """Answer one request once: ``{kind, id, …}`` back with ``text`` / ``ranks`` or ``error``."""
        if not self._served.take(str(content["id"])):
            return
        kind = content["kind"]
        reply: dict[str, object]
        try:
            if kind == "code":  # a front end without the server extension: the code, unsaved
                reply = _code()
            else:
                reply = self._answer_stacks(content) if kind == "stacks" else self._answer_usage()
        except Exception as error:  # one line in the grid, never a traceback
            reply = {"error": f"{type(error).__name__}: {error}".splitlines()[0]}
        self.send({"kind": kind, "id": content["id"], **reply})

    def _answer_stacks(self, content: Request) -> dict[str, object]:
        if self._stacks is None or not self._run_id:
            return {"error": "stacks are not available for this grid"}
        indices = [int(i) for i in content.get("ranks") or [] if 0 <= int(i) < len(self._points)]
        if not indices:
            return {"error": "no such rank"}
        return {
            "ranks": indices,
            "text": self._stacks(self._run_id, sorted({self._points[i][1] for i in indices})),
        }

    def _answer_usage(self) -> dict[str, object]:
        if self._usage is None or not self._run_id:
            return {"error": "resources are not available for this grid"}
        with self._usage_lock:  # at most one sample at a time, and one per USAGE_EVERY
            if self._clock() - self._usage_at < USAGE_EVERY:
                return {"ranks": {}, "skipped": True}
            samples = self._usage(self._run_id)
            self._usage_at = self._clock()
        where = {point: i for i, point in enumerate(self._points)}
        out: dict[str, object] = {}
        idle: set[int] = set()
        for sample in samples:
            index = where.get((str(sample.get("key")), int(str(sample.get("rank") or 0))))
            if index is not None:
                out[str(index)] = {k: sample.get(k) for k in ("cpu", "rss", "gpu_mib", "idle")}
                if sample.get("idle"):
                    idle.add(index)
        self._fold.idle = frozenset(idle)  # the next flush splits the idle ranks off, flagged
        self._fold.version += 1
        return {"ranks": out}

    def _repr_mimebundle_(self, **_kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        # static first: a header for text front ends and HTML for the others, no widget view
        # (a saved one shows "model not found" wherever our labextension is not)
        return fallback_bundle(self.title), {}

    def grid_bundle(self, state: RunState) -> dict[str, Any]:
        """The grid's output while ``state`` runs: a text header for text front ends, and the
        running payload with its HTML, naming this widget's model, from which our labextension
        draws the live grid (``RunState.running_bundle``). No widget view: every other front end
        shows the static copy, and a notebook reopened without this kernel says "still running
        when saved — %remote attach <id>"."""
        return {
            "text/plain": fallback_text(self.title),
            **state.running_bundle(self.detached, model_id=self.model_id),
        }


def _code() -> dict[str, object]:
    """The grid's code for a loader that cannot fetch it from the server extension."""
    return {"esm": read_code(RUN_JS), "css": read_code(RUN_CSS)}


def fallback_text(title: str) -> str:
    """The text/plain of the grid: a header line for the streamed lines in text
    front ends (the run's result follows as its own output)."""
    return title or "%%remote"


def fallback_bundle(title: str) -> dict[str, str]:
    """text/plain and text/html of the grid."""
    text = fallback_text(title)
    return {"text/plain": text, "text/html": f"<b>{html.escape(text)}</b>"}
