"""Actors' output into the cell that was running when it was produced.

Procs send chunks of their fds 1/2 stamped with the wall-clock time they were
read (:mod:`.worker`). :class:`Router` (pure: no threads, no IPython) gives
each chunk to the latest cell that had started by then — so a line printed
during a call lands in that call's cell even when it arrives after the call
returned, and output produced between cells goes to the cell before, never to
the next one — and renders each cell's lines as ``%%remote`` does (labels
``[hosts=1]`` / ``[hosts=1:err]``, coalesced writes, bounded, ``\\r`` handled)
with :class:`~monarch_jupyter.remote.view.render.TextRenderer`. :class:`Forwarder`
runs it on a thread and publishes each write as a stream message of its cell.
"""

from __future__ import annotations

import bisect
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..remote.view.model import ERR, OUT, Output, RankState, RunState
from ..remote.view.render import BURST, MAX_RATE, TextRenderer, prefix
from ..system.files import private_opener
from ..text.rank_sets import label

KEEP_CELLS = 64  # cells remembered for attributing late chunks
RETIRE_AFTER = 2.0  # a cell no longer the newest, quiet this long, gets its final tails and is dropped
TICK = 0.01  # the forwarder's step while output flows
IDLE_TICK = 0.1  # and while it does not
SETTLE_QUIET = 0.02  # at a cell's end, output paused this long is taken as all there is…
SETTLE_MAX = 0.1  # …waiting at most this long for that

Publish = Callable[[Mapping[str, Any], str], None]  # (the cell's parent header, text)


def rank_label(record: Mapping[str, Any]) -> str:
    """``gpus=0``; ``anon#2 gpus=0`` when the kernel named the chunk's proc mesh (``mesh``: another
    live mesh has the same dims, so the point alone would not tell them apart)."""
    text = label((str(k), int(v)) for k, v in record["point"])
    mesh = record.get("mesh")
    return f"{mesh} {text}" if mesh else text


class Log:
    """Every line of every proc, labelled, appended to one file per kernel: what a cell could not
    show live (a rank's LIVE_LINES cap, a write's budget) is there."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file = open(path, "a", encoding="utf-8", errors="replace", opener=private_opener)  # noqa: SIM115 (kept open)
        self._pending: dict[tuple[int, str], str] = {}  # (pid, stream) → its unfinished line

    def add(self, record: Mapping[str, Any]) -> None:
        key = (int(record["pid"]), ERR if record.get("stream") == "err" else OUT)
        *lines, self._pending[key] = (self._pending.get(key, "") + str(record["text"])).split("\n")
        if lines:
            tag = prefix(rank_label(record), key[1])
            self._file.write("".join(tag + line + "\n" for line in lines))

    def flush(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._file.flush()


@dataclass
class _Target:
    """One cell's output. Its write budget is kept here, not in the renderer, because a new
    rank (the labels' width changes) means a new renderer, and each starts with a full burst."""

    parent: Mapping[str, Any]
    state: RunState
    renderer: TextRenderer
    index: dict[int, int] = field(default_factory=dict)  # proc pid → rank index
    waiting: list[Mapping[str, Any]] = field(default_factory=list)  # chunks of ranks not in it yet
    fed_at: float = 0.0  # monotonic time of the last chunk
    tokens: float = float(BURST)
    filled: float | None = None

    def due(self, now: float) -> bool:
        if self.filled is not None:
            self.tokens = min(float(BURST), self.tokens + (now - self.filled) * MAX_RATE)
        self.filled = now
        return self.tokens >= 1.0

    def feed(self, record: Mapping[str, Any]) -> None:
        stream = ERR if record.get("stream") == "err" else OUT
        fed = self.state.apply(Output(self.index[int(record["pid"])], stream, str(record["text"])))
        self.renderer.add(fed)

    def take_waiting(self, now: float) -> str:
        """Add the waiting ranks (one new renderer); returns what the old one still had queued."""
        text = self.renderer.flush(now, force=True)
        for record in self.waiting:
            pid = int(record["pid"])
            if pid not in self.index:
                point = [(str(k), int(v)) for k, v in record["point"]]
                self.index[pid] = len(self.state.ranks)
                self.state.ranks.append(
                    RankState(rank_label(record), "actors", dict(point), self.index[pid], pid=pid)
                )
        self.renderer = TextRenderer(self.state)
        for record in self.waiting:
            self.feed(record)
        self.waiting = []
        return text


def _new_state(log_path: str | None) -> RunState:
    return RunState(
        command="", mode="actors", target="actors", ranks=[], started=time.time(), log_path=log_path
    )


class Router:
    """Chunks → per-cell renderers → writes. Call :meth:`cell` when a cell starts."""

    def __init__(self, log_path: str | None = None) -> None:
        self.log_path = log_path  # shown where a cell could not show every line
        self._starts: list[float] = []  # wall-clock start of each remembered cell, ascending
        self._parents: list[Mapping[str, Any]] = []
        self._targets: dict[str, _Target] = {}  # the cell's msg_id → its output

    def cell(self, started: float, parent: Mapping[str, Any]) -> None:
        self._starts.append(started)
        self._parents.append(parent)
        if len(self._starts) > KEEP_CELLS:
            del self._starts[0], self._parents[0]

    def _parent_at(self, when: float) -> Mapping[str, Any] | None:
        if not self._parents:
            return None
        at = bisect.bisect_right(self._starts, when) - 1
        return self._parents[max(at, 0)]  # before every known cell: the oldest one

    def add(self, record: Mapping[str, Any], now: float) -> None:
        """Route one chunk to the cell that was running when it was produced."""
        parent = self._parent_at(float(record.get("time", 0.0)))
        if parent is None:
            return
        target = self._targets.get(_key(parent))
        if target is None:
            target = _Target(parent, state := _new_state(self.log_path), TextRenderer(state))
            self._targets[_key(parent)] = target
        target.fed_at = now
        if int(record["pid"]) in target.index and not target.waiting:
            target.feed(record)
        else:
            target.waiting.append(record)  # in order behind the first chunk of a new rank

    def flush(self, now: float, force: bool = False) -> list[tuple[Mapping[str, Any], str]]:
        """The writes due now (≤ MAX_RATE a second per cell, BURST back to back; everything with
        ``force``, as at a cell's end); cells left behind get their final tails and are forgotten."""
        writes = []
        newest = _key(self._parents[-1]) if self._parents else None
        for key, target in list(self._targets.items()):
            retire = key != newest and now - target.fed_at > RETIRE_AFTER
            if not target.due(now) and not (retire or force):
                continue
            text = target.take_waiting(now) if target.waiting else ""
            text += target.renderer.flush(now, force=True)
            if retire:
                text += target.renderer.finish()
                del self._targets[key]
            if text:
                target.tokens -= 1.0
                writes.append((target.parent, text))
        return writes

    def busy(self, now: float) -> bool:
        """Whether output flowed lately (the forwarder then steps faster)."""
        return any(now - t.fed_at < 1.0 for t in self._targets.values()) or len(self._targets) > 1


def _key(parent: Mapping[str, Any]) -> str:
    return str(parent.get("msg_id") or id(parent))


class Forwarder:
    """Runs a :class:`Router` on a daemon thread: ``feed`` chunks from any thread, ``cell`` from
    the kernel's ``pre_run_cell``, ``settle`` from its ``post_run_cell``; each write goes to
    ``publish``."""

    def __init__(self, publish: Publish, log: Log | None = None, shown_log: str | None = None) -> None:
        self.publish = publish
        self.log = log
        self.router = Router(shown_log if log is not None else None)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._fed_at = 0.0  # monotonic time of the last chunk fed
        threading.Thread(target=self._run, name="monarch-jupyter-actor-output", daemon=True).start()

    def feed(self, record: Mapping[str, Any]) -> None:
        self._fed_at = time.monotonic()
        self._queue.put(("chunk", record))

    def cell(self, started: float, parent: Mapping[str, Any]) -> None:
        self._queue.put(("cell", (started, parent)))

    def settle(self) -> None:
        """At a cell's end: when actors printed lately, wait for their output to pause (at most
        SETTLE_MAX) and write all of it now, so that it comes before the cell's end."""
        now = time.monotonic()
        if now - self._fed_at > 1.0:
            return
        deadline = now + SETTLE_MAX
        while time.monotonic() < deadline and time.monotonic() - self._fed_at < SETTLE_QUIET:
            time.sleep(SETTLE_QUIET / 4)
        done = threading.Event()
        self._queue.put(("settle", done))
        done.wait(SETTLE_MAX)

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=TICK if self.router.busy(time.monotonic()) else IDLE_TICK)
            except queue.Empty:
                item = None
            settled: list[threading.Event] = []
            deadline = time.monotonic() + TICK
            while item is not None:
                kind, value = item
                if kind == "cell":
                    self.router.cell(*value)
                elif kind == "settle":
                    settled.append(value)
                else:
                    if self.log is not None:
                        self.log.add(value)
                    self.router.add(value, time.monotonic())
                if time.monotonic() > deadline:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    item = None
            for parent, text in self.router.flush(time.monotonic(), force=bool(settled)):
                with contextlib.suppress(Exception):  # a failed write must not stop the thread
                    self.publish(parent, text)
            if self.log is not None:
                self.log.flush()
            for done in settled:
                done.set()


def kernel_publisher(shell: Any) -> Publish:
    """Stream messages to the cell of ``parent`` (ipykernel), or plain stdout (terminal IPython)."""
    kernel = getattr(shell, "kernel", None)
    session = getattr(kernel, "session", None)
    socket = getattr(kernel, "iopub_socket", None)
    if session is None or socket is None:
        import sys

        def to_stdout(parent: Mapping[str, Any], text: str) -> None:
            sys.__stdout__.write(text)  # type: ignore[union-attr]
            sys.__stdout__.flush()  # type: ignore[union-attr]

        return to_stdout

    def to_cell(parent: Mapping[str, Any], text: str) -> None:
        session.send(
            socket, "stream", {"name": "stdout", "text": text}, parent=dict(parent), ident=b"stream.stdout"
        )

    return to_cell
