"""The live grid's grouped tiles: ranks whose output is identical so far share one tile, labelled
in clush's notation (``hosts=[0-6,8] (8)``). The rules are live ``--group``'s
(:mod:`~monarch_jupyter.remote.view.livefold`): a line is decided once every member of a group printed
one at that position; the members are split by it (the largest part stays the group); a member
lagging ``HOLD`` seconds behind the others' next line goes on as a group of its own; groups never
merge again. Unlike LiveFold it counts the members still owing a line, so a line costs O(1)
whatever the group's size (LiveFold looks at every member's queue per line: 4,096 ranks cost
O(N) per line), and it keeps no text to print. Tiles are split further by what a tile shows
(status, return code, error, quiet, idle); failing groups come first, then quiet or idle ones,
then the largest. Pure: no threads, no widgets; the clock is the caller's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from ..remote.view.lines import LINE_CHARS, Fed, shown
from ..remote.view.livefold import HOLD
from ..remote.view.model import RankState
from ..remote.view.quiet import ranks_label

MAX_GROUPS = 512  # more groups than this: grouping does not help, the grid shows tiles (paged)


class Group(TypedDict):
    """One grouped tile as the front end draws it (``run.js``)."""

    label: str  # hosts=[0-6,8] (8)
    ranks: list[list[int]]  # the members' tile indices as [first, last] runs
    count: int
    rank: int  # the first member: its tile and output stand for the group
    status: str
    failing: bool
    quiet: bool
    idle: bool  # ~0 % CPU while the others work (the grid's resources, remote/view/resources.py)


def runs(indices: Sequence[int]) -> list[list[int]]:
    """``[0, 1, 2, 5]`` → ``[[0, 2], [5, 5]]`` (sorted input)."""
    out: list[list[int]] = []
    for i in indices:
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def _tail_fed(index: int, lines: list[tuple[str, str]]) -> list[Fed]:
    """A rank's kept lines as the Fed items a run would have made of them (one per stream run)."""
    out: list[Fed] = []
    start = 0
    for i in range(1, len(lines) + 1):
        if i == len(lines) or lines[i][0] != lines[start][0]:
            text = "\n".join(line for _, line in lines[start:i]) + "\n"
            out.append(Fed(index, lines[start][0], "", text, len(text) - 1, i - start))
            start = i
    return out


class _Members:
    """One group of ranks: its members, how many of them owe the next line, since when."""

    __slots__ = ("members", "owing", "since")

    def __init__(self, members: list[int], owing: int) -> None:
        self.members = members
        self.owing = owing  # members with no undecided line
        self.since: float | None = None  # when a member's undecided line first waited


class GridFold:
    """Follows a run's lines (:meth:`add`, :meth:`tick`) and groups its tiles (:meth:`groups`)."""

    def __init__(self, ranks: list[RankState], now: float | None = None) -> None:
        self.ranks = ranks
        everyone = _Members(list(range(len(ranks))), len(ranks))
        self.groups_: list[_Members] = [everyone]
        self.group_of: list[_Members] = [everyone] * len(ranks)
        self.pending: list[deque[tuple[str, str]]] = [deque() for _ in ranks]
        self.idle: frozenset[int] = frozenset()  # tile indices idle while others work (the widget sets it)
        self.version = 0  # bumped whenever a group splits or `idle` is set (groups() may differ)
        seed = [
            fed
            for i, rank in enumerate(ranks)
            if rank.lines
            for fed in _tail_fed(i, list(rank.lines.last(len(rank.lines))))
        ]
        self.add(seed, now)

    def add(self, fed: Iterable[Fed], now: float | None) -> None:
        """Complete lines of the ranks; ``now`` (None: not known yet) stamps a line that waits."""
        if len(self.groups_) == len(self.ranks):  # every rank alone: nothing left to group
            return
        group_of, pendings = self.group_of, self.pending
        for item in fed:
            group = group_of[item.index]
            if len(group.members) == 1:  # alone: nothing to decide, nothing to keep
                continue
            pending = pendings[item.index]
            was_empty = not pending
            if item.count == 1 and not item.prefix and not item.dropped:  # one whole line: most events
                line = item.text[: item.end]  # as Fed.last(1) shows it, without its call
                pending.append((item.stream, shown(line) if len(line) > LINE_CHARS or "\r" in line else line))
            else:
                pending.extend((item.stream, line) for line in item.last(item.count))
            if was_empty and pending:
                group.owing -= 1
                if group.since is None:
                    group.since = now if now is not None else float("-inf")
            while group.owing == 0 and len(group.members) > 1:
                group = self._decide(group, now)

    def _decide(self, group: _Members, now: float | None) -> _Members:
        """Every member has a line at the next position: split the group by it; returns the part
        that stays (the largest; on a tie the lowest rank's)."""
        pending, members = self.pending, group.members
        head = pending[members[0]][0]
        owing = at = 0
        for m in members:  # most lines are every member's: one pass, no split
            queue = pending[m]
            if queue[0] != head:
                break
            queue.popleft()
            owing += not queue
            at += 1
        else:
            group.owing = owing  # as _recount would count it, without a second pass
            group.since = (now if now is not None else float("-inf")) if owing < len(members) else None
            return group
        parts: dict[tuple[str, str], list[int]] = {head: members[:at]}
        for m in members[at:]:
            parts.setdefault(pending[m].popleft(), []).append(m)
        ordered = sorted(parts.values(), key=lambda part: (-len(part), part[0]))
        group.members = ordered[0]
        for members in ordered[1:]:
            self._split_off(members, now)
        self._recount(group, now)
        return group

    def _split_off(self, members: list[int], now: float | None) -> None:
        self.version += 1
        new = _Members(members, 0)
        self.groups_.append(new)
        for m in members:
            self.group_of[m] = new
        self._recount(new, now)
        while new.owing == 0 and len(new.members) > 1:
            self._decide(new, now)

    def _recount(self, group: _Members, now: float | None) -> None:
        group.owing = sum(1 for m in group.members if not self.pending[m])
        if len(group.members) == 1:
            self.pending[group.members[0]].clear()
        waiting = group.owing < len(group.members)  # a decided line makes the next one's wait start now
        group.since = (now if now is not None else float("-inf")) if waiting else None

    def tick(self, now: float) -> None:
        """Split off the laggards of a group whose next line waited HOLD seconds for them."""
        for group in list(self.groups_):
            if group.since is None or len(group.members) == 1:
                continue
            if group.since == float("-inf"):
                group.since = now
            if now - group.since < HOLD or group.owing == 0:
                continue
            laggards = [m for m in group.members if not self.pending[m]]
            group.members = [m for m in group.members if self.pending[m]]
            self._split_off(laggards, now)
            self._recount(group, now)
            while group.owing == 0 and len(group.members) > 1:
                self._decide(group, now)

    def groups(self, tiles: Sequence[Mapping[str, Any]]) -> list[Group]:
        """The tiles grouped: same output so far and the same tile state."""
        parts: dict[tuple[int, str, Any, Any, bool, bool], list[int]] = {}
        idle = self.idle
        for group in self.groups_:
            for m in group.members:
                tile = tiles[m]
                quiet = bool(tile["quiet_since"])
                key = (id(group), tile["status"], tile["returncode"], tile["error"], quiet, m in idle)
                parts.setdefault(key, []).append(m)
            if len(parts) > MAX_GROUPS:
                return []
        out = [
            self._group(members, status, quiet, is_idle, tiles)
            for (_, status, _, _, quiet, is_idle), members in parts.items()
        ]
        out.sort(key=lambda g: (not g["failing"], not (g["quiet"] or g["idle"]), -g["count"], g["rank"]))
        return out

    def _group(
        self, members: list[int], status: str, quiet: bool, idle: bool, tiles: Sequence[Mapping[str, Any]]
    ) -> Group:
        members.sort()
        label = ranks_label(self.ranks[m] for m in members)
        return {
            "label": label + (f" ({len(members)})" if len(members) > 1 else ""),
            "ranks": runs(members),
            "count": len(members),
            "rank": members[0],
            "status": status,
            "failing": bool(tiles[members[0]]["failing"]),
            "quiet": quiet,
            "idle": idle,
        }
