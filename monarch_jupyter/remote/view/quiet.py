"""Quiet ranks: a running rank that printed nothing for much longer than the others, or than
``%%remote --quiet-after S`` (pure: no Monarch, no threads; the clock is the caller's).

:class:`QuietWatch` looks at a run every :data:`CHECK_EVERY` seconds: a rank printed when its
byte count grew since the last look (no cost on the path of each line). A rank is quiet when
its silence is at least ``--quiet-after``, or, without it, at least :data:`FLOOR` seconds and
:data:`FACTOR` times the median silence of the running ranks while at least one other rank
printed within the threshold. A quiet rank's :attr:`~.model.RankState.quiet_since` is set (the
grid shows it as a tile state) and :meth:`QuietWatch.check` returns one line for the text view::

    hosts=7 quiet for 42 s; 63 others printing
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Protocol

from ...text import timefmt as _timefmt
from ...text.rank_sets import rank_set
from .model import RUNNING, RunState

CHECK_EVERY = 0.5  # seconds between looks
FLOOR = 10.0  # seconds: no rank is quiet sooner without --quiet-after
FACTOR = 10.0  # … and not before FACTOR × the median silence of the running ranks


class Ranked(Protocol):
    @property
    def mesh(self) -> str: ...

    @property
    def point(self) -> dict[str, int]: ...


def ranks_label(ranks: Iterable[Ranked]) -> str:
    """``hosts=[0-6,8]``, or ``mesh/hosts=…; other/hosts=…`` across meshes (clush's notation)."""
    by_mesh: dict[str, list[tuple[tuple[str, int], ...]]] = {}
    for rank in ranks:
        by_mesh.setdefault(rank.mesh, []).append(tuple(rank.point.items()))
    several = len(by_mesh) > 1
    return "; ".join(
        (f"{mesh}/" if several else "") + rank_set(points, brackets=True) for mesh, points in by_mesh.items()
    )


def threshold(silences: list[float], quiet_after: float | None) -> float:
    """The silence from which a running rank is quiet, given every running rank's silence."""
    if quiet_after is not None:
        return quiet_after
    typical = statistics.median(silences) if silences else 0.0
    return max(FLOOR, FACTOR * typical)


def quiet_for(seconds: float) -> str:
    """``42 s``, ``3.5 min``."""
    return f"{seconds:.0f} s" if seconds < 60 else _timefmt.span(seconds)


class QuietWatch:
    """Follows one run's ranks' output; :meth:`check` flags and unflags quiet ranks."""

    def __init__(self, state: RunState, quiet_after: float | None = None) -> None:
        self.state = state
        self.quiet_after = quiet_after
        self._bytes = [-1] * len(state.ranks)  # byte count at the last look (-1: not seen running)
        self._since: list[float | None] = [None] * len(state.ranks)  # when it last printed
        self._checked: float | None = None

    def silence(self, index: int, now: float) -> float | None:
        """Seconds since rank ``index`` last printed (None: not running, or not looked at yet)."""
        since = self._since[index]
        return None if since is None or self.state.ranks[index].status != RUNNING else now - since

    def check(self, now: float) -> str:
        """Look at the ranks (at most every CHECK_EVERY s); a line for ranks newly quiet ('' if none)."""
        if self._checked is not None and now - self._checked < CHECK_EVERY:
            return ""
        self._checked = now
        running = []
        for index, rank in enumerate(self.state.ranks):
            if rank.status != RUNNING:
                rank.quiet_since = None
                continue
            if rank.nbytes != self._bytes[index]:
                first = self._bytes[index] < 0 and rank.nbytes == 0
                self._bytes[index] = rank.nbytes
                self._since[index] = rank.started if first and rank.started is not None else now
            running.append(index)
        silences = {i: now - (self._since[i] or now) for i in running}
        limit = threshold(list(silences.values()), self.quiet_after)
        quiet = [i for i in running if silences[i] >= limit]
        printing = len(running) - len(quiet)
        if self.quiet_after is None and not printing:
            quiet = []  # all silent alike: nobody is quieter than the others
        fresh = []
        for index in running:
            rank = self.state.ranks[index]
            if index in quiet and rank.quiet_since is None:
                rank.quiet_since = self._since[index]
                fresh.append(index)
            elif index not in quiet:
                rank.quiet_since = None
        if not fresh:
            return ""
        longest = max(silences[i] for i in fresh)
        return (
            f"{ranks_label(self.state.ranks[i] for i in fresh)} quiet for {quiet_for(longest)}; "
            f"{printing} other{'s' if printing != 1 else ''} printing"
        )
