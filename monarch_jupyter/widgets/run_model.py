"""What the live rank grid sends: batches of changes read from a run's ``RunState``.

The grid holds no facts of its own: statuses, tails, counts, failing ranks and
summaries live in :class:`~monarch_jupyter.remote.view.model.RunState`.
:class:`GridSync` only remembers what it already sent (the tiles and how many
lines of each rank), so :meth:`GridSync.take` can say what changed since —
which is what the widget sends in one batch. Pure: no threads, no widgets.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypedDict

from ..remote.view.model import ERR, OUT, RankState, RunState
from .grid_fold import GridFold, Group

PROGRESS_EVERY = 0.25  # a tile's progress bar is re-read at most this often (as the cell's display)
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
    quiet_since: float | None  # epoch seconds of its last output while it is quiet (remote/view/quiet.py)
    progress: str | None  # its \r-rewritten unfinished line (a tqdm bar) as it stands: the tile's last line


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
        "progress": _progress(rank),
    }


def _progress(rank: RankState) -> str | None:
    """A rank's progress bar as it stands (stderr's first, where tqdm writes), None without one."""
    for stream in (ERR, OUT):
        if rank.rewound[stream] and rank.pending[stream]:
            return rank.partial(stream) or None
    return None


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


PAGE = 200  # tiles a view draws at first (run.js grows it by as many with each "more" click)


@dataclass(frozen=True)
class View:
    """What the front end draws: the kernel sends only these tiles and these ranks' lines."""

    grouped: bool = False  # one tile per group (when the fold has groups)
    failing_only: bool = False
    limit: int = PAGE  # tiles drawn at most
    selected: int = -1  # the rank whose output is shown (-1: none)


@dataclass
class Batch:
    """What changed since the previous :meth:`GridSync.take`."""

    tiles: list[Tile] | None  # the tiles the view draws, when any of them changed (all, without a view)
    lines: dict[int, list[list[str]]]  # rank -> new [stream, text] lines (at most BATCH_LINES)
    dropped: dict[int, int]  # rank -> new lines not listed (a flood inside one batch)
    summary: str
    stopping: str
    finished: bool
    groups: list[Group] | None = None  # the grouped tiles, when they changed (a GridSync with a fold)
    tiles_total: int = 0  # tiles in the view's whole order (the page is its first ``limit``)
    detail: Tile | None = None  # the selected rank's tile when it is not among ``tiles``
    detail_changed: bool = False
    tails: dict[int, list[list[str]]] = field(default_factory=dict)  # ranks newly followed: their tail
    earlier: dict[int, int] = field(default_factory=dict)  # … and the lines before that tail

    def message(self) -> dict[str, object] | None:
        """The custom message carrying the new lines (None when there are none)."""
        if not self.lines and not self.dropped and not self.tails:
            return None
        out: dict[str, object] = {
            "kind": "lines",
            "lines": {str(rank): lines for rank, lines in self.lines.items()},
            "dropped": {str(rank): n for rank, n in self.dropped.items()},
        }
        if self.tails:  # replaces what the view kept of these ranks
            out["tails"] = {str(rank): lines for rank, lines in self.tails.items()}
            out["earlier"] = {str(rank): n for rank, n in self.earlier.items()}
        return out


class GridSync:
    """Reads ``state`` and hands out what the front end has not seen yet.

    With a :attr:`view` it hands out only what that view draws (a page of tiles, or one tile
    per group) and follows only those ranks' lines, so a batch does not grow with the ranks; a
    rank the view starts drawing comes with its tail (``Batch.tails``)."""

    def __init__(self, state: RunState, seen_lines: bool = False, fold: GridFold | None = None) -> None:
        """``seen_lines``: the lines so far travel as each followed rank's tail (the first batch's
        ``tails``), not as new lines; ``fold``: the run's lines grouped (then each batch says how
        the tiles group)."""
        self.state = state
        self.fold = fold
        self.view: View | None = None  # None: every tile, every rank's lines
        self._groups: list[Group] | None = None
        self._groups_key: tuple[int, int] | None = None
        self._all: list[Tile] = []  # every tile, read at ``_version``
        self._tiles: list[Tile] | None = None  # the tiles last handed out
        self._total = -1
        self._detail: Tile | None = None
        # rank -> lines the front end has of it (counted), for the ranks it follows
        self._seen: dict[int, int] = {} if seen_lines else dict.fromkeys(range(len(state.ranks)), 0)
        self._meta: tuple[str, str, bool] | None = None
        self._version = -1  # the state's version the tiles were read at
        self._page_key: tuple[object, ...] | None = None
        self._page: tuple[list[int], int] = ([], 0)
        self._tiles_key: tuple[int, int] | None = None
        self._page_serial = 0  # bumped with each new page
        self._serial = 0  # bumped each time the tiles were read
        self._rewrites = 0  # the state's rewrites when the tiles were read, and when
        self._rewrites_at = float("-inf")
        self.clock: Callable[[], float] = time.monotonic

    def take(self) -> Batch | None:
        """What changed since the last take (None if nothing did)."""
        state = self.state
        # output alone changes no tile (no need to read N ranks), but a progress bar's line does:
        # read at most every PROGRESS_EVERY while bars move
        rewritten = state.rewrites != self._rewrites and self.clock() - self._rewrites_at >= PROGRESS_EVERY
        if state.version != self._version or rewritten:
            self._version = state.version
            self._rewrites, self._rewrites_at = state.rewrites, self.clock()
            self._all = [tile_json(index, rank) for index, rank in enumerate(state.ranks)]
            self._serial += 1
        groups = self._take_groups()
        view = self.view
        shown, total = self._shown(view)
        changed_tiles = None
        if (self._serial, self._page_serial) != self._tiles_key:  # the page or a tile moved
            self._tiles_key = (self._serial, self._page_serial)
            page = [self._all[i] for i in shown]
            changed_tiles = page if page != self._tiles or total != self._total else None
            self._tiles, self._total = page, total
        selected = view.selected if view is not None else -1
        detail = (
            self._all[selected] if 0 <= selected < len(self._all) and selected not in set(shown) else None
        )
        detail_changed = detail != self._detail
        self._detail = detail
        follow = shown if detail is None else [*shown, selected]
        lines, dropped, tails_, earlier = self._take_lines(follow)
        meta = (state.progress_line(), state.stopping or "", state.finished)
        if (
            changed_tiles is None
            and groups is None
            and not detail_changed
            and not lines
            and not dropped
            and not tails_
            and meta == self._meta
        ):
            return None
        self._meta = meta
        return Batch(
            changed_tiles, lines, dropped, *meta, groups, total, detail, detail_changed, tails_, earlier
        )

    def _shown(self, view: View | None) -> tuple[list[int], int]:
        """The tile indices ``view`` draws, in its order, and how many its whole order has."""
        everyone = len(self._all)
        key = (self._version, self._groups_key, view)
        if key == self._page_key:
            return self._page
        if view is None:
            page = (list(range(everyone)), everyone)
        elif view.grouped and self._groups:
            eligible = [g["rank"] for g in self._groups if g["failing"] or not view.failing_only]
            page = (eligible[: view.limit], len(eligible))
        else:
            failing = [t["rank"] for t in self._all if t["failing"]]
            if view.failing_only:
                order = failing
            elif everyone > view.limit and failing:  # past one page failing ranks first
                chosen = set(failing[: view.limit])
                order = failing + [i for i in range(everyone) if i not in chosen]
            else:
                order = list(range(everyone))
            page = (order[: view.limit], len(order))
        self._page_key, self._page = key, page
        self._page_serial += 1
        return page

    def _take_lines(
        self, follow: list[int]
    ) -> tuple[dict[int, list[list[str]]], dict[int, int], dict[int, list[list[str]]], dict[int, int]]:
        """New lines of the followed ranks; a rank newly followed gets its tail instead."""
        ranks = self.state.ranks
        seen = self._seen
        if len(seen) != len(follow) or any(i not in seen for i in follow):
            wanted = set(follow)
            for index in [i for i in seen if i not in wanted]:
                del seen[index]  # not drawn any more: its tail comes again if it is
        fresh = [i for i in follow if i not in seen and ranks[i].lines]
        tails_: dict[int, list[list[str]]] = {}
        earlier: dict[int, int] = {}
        if fresh:
            each = min(OPEN_TAIL, max(1, OPEN_TOTAL // len(fresh)))
            for index in fresh:
                rank = ranks[index]
                tails_[index] = [[stream, line] for stream, line in rank.lines.last(each)]
                earlier[index] = rank.total_lines - len(tails_[index])
        for index in follow:
            if index not in seen:
                seen[index] = ranks[index].total_lines
        lines: dict[int, list[list[str]]] = {}
        dropped: dict[int, int] = {}
        news = [(index, new) for index, done in seen.items() if (new := ranks[index].total_lines - done) > 0]
        per_rank = min(BATCH_LINES, max(1, BATCH_TOTAL // max(1, len(news))))
        for index, new in news:
            rank = ranks[index]
            seen[index] += new
            listed = rank.lines.last(min(new, per_rank))
            if listed:
                lines[index] = [[stream, line] for stream, line in listed]
            if new > len(listed):
                dropped[index] = new - len(listed)
        return lines, dropped, tails_, earlier

    def followed_tails(self) -> dict[str, list[list[str]]]:
        """The last lines of the ranks the view follows (all, without a view), fewer each past
        OPEN_TOTAL in all: what a view opened later starts from."""
        ranks = self.state.ranks
        printed = [i for i in sorted(self._seen) if ranks[i].lines] if self.view is not None else None
        if printed is None:
            printed = [i for i, rank in enumerate(ranks) if rank.lines]
        each = min(OPEN_TAIL, max(1, OPEN_TOTAL // max(1, len(printed))))
        return {str(i): [[stream, line] for stream, line in ranks[i].lines.last(each)] for i in printed}

    def _take_groups(self) -> list[Group] | None:
        """The groups when they changed (they are re-read only when the fold or a tile moved)."""
        if self.fold is None:
            return None
        key = (self._version, self.fold.version)
        if key == self._groups_key:
            return None
        self._groups_key = key
        groups = self.fold.groups(self._all)
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
        return self.clock() >= self.last + self.interval  # wait() == 0, without its max()

    def mark(self) -> None:
        self.last = self.clock()
