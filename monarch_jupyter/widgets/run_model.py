"""What the live rank grid sends: batches of changes read from a run's ``RunState``.

The grid holds no facts of its own: statuses, tails, counts, failing ranks and
summaries live in :class:`~monarch_jupyter.remote.model.RunState`.
:class:`GridSync` only remembers what it already sent (the tiles and how many
lines of each rank), so :meth:`GridSync.take` can say what changed since —
which is what the widget sends in one batch. Pure: no threads, no widgets.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

from ..remote.model import ERR, OUT, RankState, RunState
from .grid_fold import GridFold, Group

BATCH_LINES = 200  # new lines per rank per batch; older ones in the same batch are only counted
BATCH_TOTAL = 2000  # new lines per batch, all ranks together (then BATCH_TOTAL // ranks each, >= 1)
OPEN_TAIL = 50  # lines per rank a view opened later starts from …
OPEN_TOTAL = 3200  # … while all ranks together have at most this many (then fewer each, >= 1)


class Tile(TypedDict):
    """One rank's tile as the front end draws it (``run.js``)."""

    rank: int
    label: str
    status: str
    failing: bool
    returncode: int | None
    duration: float | None
    started: float | None
    error: str | None
    quiet_since: float | None  # epoch seconds of its last output while it is quiet (remote/quiet.py)


def tile_json(index: int, rank: RankState) -> Tile:
    """What the front end needs to draw one rank's tile (lines travel separately)."""
    return {
        "rank": index,
        "label": rank.label,
        "status": rank.status,
        "failing": rank.failing,
        "returncode": rank.returncode,
        "duration": None if rank.duration is None else round(rank.duration, 3),
        "started": rank.started,
        "error": rank.error,
        "quiet_since": rank.quiet_since,
    }


def tails(state: RunState, limit: int = OPEN_TAIL) -> dict[str, list[list[str]]]:
    """The last ``limit`` lines of every rank with output (for views opened later), fewer each
    past OPEN_TOTAL lines in all."""
    printed = sum(1 for rank in state.ranks if rank.lines)
    limit = min(limit, max(1, OPEN_TOTAL // max(1, printed)))
    return {
        str(index): [[stream, line] for stream, line in rank.lines.last(limit)]
        for index, rank in enumerate(state.ranks)
        if rank.lines
    }


@dataclass
class Batch:
    """What changed since the previous :meth:`GridSync.take`."""

    tiles: list[Tile] | None  # every tile, when any of them changed
    lines: dict[int, list[list[str]]]  # rank -> new [stream, text] lines (at most BATCH_LINES)
    dropped: dict[int, int]  # rank -> new lines not listed (a flood inside one batch)
    summary: str
    stopping: str
    finished: bool
    groups: list[Group] | None = None  # the grouped tiles, when they changed (a GridSync with a fold)

    def message(self) -> dict[str, object] | None:
        """The custom message carrying the new lines (None when there are none)."""
        if not self.lines and not self.dropped:
            return None
        return {
            "kind": "lines",
            "lines": {str(rank): lines for rank, lines in self.lines.items()},
            "dropped": {str(rank): n for rank, n in self.dropped.items()},
        }


class GridSync:
    """Reads ``state`` and hands out what the front end has not seen yet."""

    def __init__(self, state: RunState, seen_lines: bool = False, fold: GridFold | None = None) -> None:
        """``seen_lines``: the lines so far travel another way (:func:`tails`), not in batches;
        ``fold``: the run's lines grouped (then each batch says how the tiles group)."""
        self.state = state
        self.fold = fold
        self._groups: list[Group] | None = None
        self._tiles: list[Tile] | None = None
        self._seen = [rank.total_lines if seen_lines else 0 for rank in state.ranks]
        self._meta: tuple[str, str, bool] | None = None
        self._version = -1  # the state's version the tiles were read at

    def take(self) -> Batch | None:
        """What changed since the last take (None if nothing did)."""
        state = self.state
        changed_tiles = None
        if state.version != self._version:  # output alone changes no tile: no need to read N ranks
            self._version = state.version
            tiles = [tile_json(index, rank) for index, rank in enumerate(state.ranks)]
            changed_tiles = tiles if tiles != self._tiles else None
            self._tiles = tiles
        lines: dict[int, list[list[str]]] = {}
        dropped: dict[int, int] = {}
        seen = self._seen
        news = [
            (index, new)
            for index, rank in enumerate(state.ranks)
            if (new := rank.counts[OUT] + rank.counts[ERR] - seen[index]) > 0
        ]
        per_rank = min(BATCH_LINES, max(1, BATCH_TOTAL // max(1, len(news))))
        for index, new in news:
            rank = state.ranks[index]
            seen[index] += new
            listed = rank.lines.last(min(new, per_rank))
            if listed:
                lines[index] = [[stream, line] for stream, line in listed]
            if new > len(listed):
                dropped[index] = new - len(listed)
        groups = self._take_groups()
        meta = (state.progress_line(), state.stopping or "", state.finished)
        if changed_tiles is None and groups is None and not lines and not dropped and meta == self._meta:
            return None
        self._meta = meta
        return Batch(changed_tiles, lines, dropped, *meta, groups=groups)

    def _take_groups(self) -> list[Group] | None:
        if self.fold is None or self._tiles is None:
            return None
        groups = self.fold.groups(self._tiles)
        if groups == self._groups:
            return None
        self._groups = groups
        return groups


def sync_interval(ranks: int, interval: float = 0.05) -> float:
    """Seconds between syncs of a grid of ``ranks``: ``interval`` up to 256 ranks, then growing
    with them (at most 1 s), so a sync's cost per second stays about that of 256 ranks."""
    return min(1.0, max(interval, interval * ranks / 256))


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
