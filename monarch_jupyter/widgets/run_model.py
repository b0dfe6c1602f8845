"""``RunView``: the plain-data model of the per-rank run grid, fed by events.

The protocol (what a runner, or an adapter over one, calls)::

    view.rank_started(rank, label)
    view.lines(rank, [(stream, text), ...])        # complete lines; stream "out" / "err"
    view.rank_finished(rank, status, returncode, duration, error=None)
    view.stopping(reason)                           # "interrupted" / "timed_out"
    view.finish(summary=None)

No threads, no widgets, no clock of its own beyond ``clock`` (injectable):
``take()`` hands out what changed since the last call — the tiles whose status
changed and the new lines per rank — which is what a widget sends in one batch.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from ..remote.model import FAILED, INTERRUPTED, OK, PENDING, RUNNING, SKIPPED, TIMED_OUT
from ..remote.model import STATUSES as FINAL

FAILING = (FAILED, TIMED_OUT, INTERRUPTED)
ORDER = (RUNNING, OK, FAILED, TIMED_OUT, INTERRUPTED, SKIPPED, PENDING)

TAIL = 200  # lines kept per rank (what a tile click shows)
BATCH_LINES = 200  # new lines per rank per batch; older ones in the same batch are only counted


@dataclass
class Tile:
    rank: int
    label: str
    status: str = PENDING
    returncode: int | None = None
    duration: float | None = None
    started: float | None = None  # wall clock (epoch seconds), for the elapsed time of running ranks
    error: str | None = None
    last: str = ""
    nlines: int = 0
    tail: deque = field(default_factory=lambda: deque(maxlen=TAIL))

    @property
    def failing(self) -> bool:
        return self.status in FAILING

    def elapsed(self, now: float) -> float | None:
        """Seconds: the final duration, or the time since it started while running."""
        if self.duration is not None:
            return self.duration
        if self.started is not None and self.status == RUNNING:
            return max(0.0, now - self.started)
        return None

    def to_json(self) -> dict:
        """What the front end needs to draw the tile (lines travel separately)."""
        return {
            "rank": self.rank,
            "label": self.label,
            "status": self.status,
            "returncode": self.returncode,
            "duration": None if self.duration is None else round(self.duration, 3),
            "started": self.started,
            "error": self.error,
        }


@dataclass
class Batch:
    """What changed since the previous ``take()``."""

    tiles: list[dict]  # changed tiles (to_json)
    lines: dict[int, list[list[str]]]  # rank -> new [stream, text] lines (at most BATCH_LINES)
    dropped: dict[int, int]  # rank -> new lines not listed (a flood inside one batch)
    summary: str
    finished: bool

    def to_json(self) -> dict:
        return {
            "kind": "lines",
            "lines": {str(rank): lines for rank, lines in self.lines.items()},
            "dropped": {str(rank): n for rank, n in self.dropped.items()},
        }


class RunView:
    """One run's tiles, fed by events; read by widgets and text fallbacks."""

    def __init__(self, labels: Sequence[str] = (), title: str = "", clock: Callable[[], float] = time.time) -> None:
        self.title = title
        self.clock = clock
        self.tiles: list[Tile] = [Tile(rank, label) for rank, label in enumerate(labels)]
        self.stop_reason: str | None = None
        self.finished = False
        self.final_summary: str | None = None
        self._changed: set[int] = set(range(len(self.tiles)))
        self._new_lines: dict[int, list[list[str]]] = {}
        self._dropped: dict[int, int] = {}
        self._meta_changed = True

    # ── events ──
    def _tile(self, rank: int, label: str | None = None) -> Tile:
        while rank >= len(self.tiles):
            index = len(self.tiles)
            self.tiles.append(Tile(index, f"rank {index}"))
            self._changed.add(index)
        tile = self.tiles[rank]
        if label and tile.label != label:
            tile.label = label
            self._changed.add(rank)
        return tile

    def rank_started(self, rank: int, label: str | None = None) -> None:
        tile = self._tile(rank, label)
        if tile.status == PENDING:
            tile.status = RUNNING
            tile.started = self.clock()
            self._changed.add(rank)

    def lines(self, rank: int, lines: Iterable[tuple[str, str]]) -> None:
        tile = self._tile(rank)
        new = [[stream, text] for stream, text in lines]
        if not new:
            return
        if tile.status == PENDING:
            self.rank_started(rank)
        tile.tail.extend((s, t) for s, t in new[-TAIL:])
        tile.nlines += len(new)
        tile.last = new[-1][1]
        pending = self._new_lines.setdefault(rank, [])
        pending.extend(new)
        if len(pending) > BATCH_LINES:
            self._dropped[rank] = self._dropped.get(rank, 0) + len(pending) - BATCH_LINES
            del pending[:-BATCH_LINES]

    def rank_finished(
        self, rank: int, status: str, returncode: int | None, duration: float | None, error: str | None = None
    ) -> None:
        tile = self._tile(rank)
        if status not in FINAL:
            raise ValueError(f"unknown final status {status!r} (one of {', '.join(FINAL)})")
        if (tile.status, tile.returncode, tile.duration, tile.error) == (status, returncode, duration, error):
            return
        tile.status, tile.returncode, tile.duration, tile.error = status, returncode, duration, error
        self._changed.add(rank)

    def stopping(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self._meta_changed = True

    def finish(self, summary: str | None = None) -> None:
        """No more events: ranks that never reported end skipped (or as the stop reason)."""
        for tile in self.tiles:
            if tile.status == PENDING:
                self.rank_finished(tile.rank, self.stop_reason or SKIPPED, None, None)
            elif tile.status == RUNNING:
                self.rank_finished(tile.rank, self.stop_reason or FAILED, None, tile.elapsed(self.clock()))
        self.finished = True
        self.final_summary = summary
        self._meta_changed = True

    # ── reading ──
    def counts(self) -> dict[str, int]:
        counts = {status: 0 for status in ORDER}
        for tile in self.tiles:
            counts[tile.status] = counts.get(tile.status, 0) + 1
        return counts

    def failing(self) -> list[Tile]:
        return [t for t in self.tiles if t.failing]

    def shown(self, failing_only: bool = False) -> list[Tile]:
        """The tiles the grid shows: all, or only the failing ones."""
        return self.failing() if failing_only else list(self.tiles)

    def output(self, rank: int) -> list[tuple[str, str]]:
        """The kept tail of a rank's output (what clicking its tile shows)."""
        return list(self.tiles[rank].tail)

    def summary(self) -> str:
        """``64 ranks: 60 ok, 2 failed, 2 running`` (the run's own line once finished)."""
        if self.final_summary:
            return self.final_summary
        parts = [f"{n} {status.replace('_', ' ')}" for status, n in self.counts().items() if n]
        head = f"{len(self.tiles)} rank{'s' if len(self.tiles) != 1 else ''}"
        text = f"{head}: {', '.join(parts)}" if parts else head
        if self.stop_reason and not self.finished:
            text += f" · stopping ({self.stop_reason.replace('_', ' ')})"
        return text

    # ── batching ──
    @property
    def dirty(self) -> bool:
        return bool(self._changed or self._new_lines or self._meta_changed)

    def take(self) -> Batch | None:
        """What changed since the last take (None if nothing did)."""
        if not self.dirty:
            return None
        batch = Batch(
            tiles=[self.tiles[rank].to_json() for rank in sorted(self._changed)],
            lines=self._new_lines,
            dropped=self._dropped,
            summary=self.summary(),
            finished=self.finished,
        )
        self._changed, self._new_lines, self._dropped = set(), {}, {}
        self._meta_changed = False
        return batch

    def tails(self, limit: int = 50) -> dict[str, list[list[str]]]:
        """The last ``limit`` lines of every rank with output (for views opened later)."""
        return {str(t.rank): [[s, x] for s, x in list(t.tail)[-limit:]] for t in self.tiles if t.tail}


class Throttle:
    """At most one flush per ``interval`` seconds: ``due()`` says whether to flush now,
    ``wait()`` how long until the next one may happen."""

    def __init__(self, interval: float = 0.05, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self.last = float("-inf")

    def wait(self) -> float:
        return max(0.0, self.last + self.interval - self.clock())

    def due(self) -> bool:
        return self.wait() == 0.0

    def mark(self) -> None:
        self.last = self.clock()
