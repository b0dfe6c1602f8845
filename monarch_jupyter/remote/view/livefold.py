"""``%%remote --group`` while the run streams: ranks whose output is identical so far print it
once, under clush's label (``[hosts=[0-6,8] (8)] step 3``); a rank is unfolded the moment it
prints a line the others did not (pure: no Monarch, no threads; the clock is the caller's).

Each rank's lines wait in its own queue until every member of its group printed a line at that
position; then the members are split by that line: the largest part (on a tie, the lowest
rank's) stays the group, every other line makes a group of the ranks that printed it, and each
part's line is shown once under its label. A member lagging :data:`HOLD` seconds behind the
others' next line would hold their output back: the laggards go on as a group of their own (and
fold among themselves). Groups never merge again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from .lines import Fed
from .model import ERR, RankState
from .quiet import ranks_label

HOLD = 1.0  # seconds a group's line waits for its slowest members


@dataclass
class _Group:
    members: list[int]
    since: float | None = None  # when its oldest undecided line came
    label: str = ""
    unstamped: bool = False  # lines came before the caller knew the time: the next tick stamps it


class LiveFold:
    """Feeds completed lines (:meth:`add`); :meth:`take` returns the labelled lines ready."""

    def __init__(self, ranks: list[RankState]) -> None:
        self.ranks = ranks
        everyone = self._group(list(range(len(ranks))))
        self.groups: list[_Group] = [everyone]
        self.group_of: list[_Group] = [everyone] * len(ranks)
        self.pending: list[deque[tuple[str, str]]] = [deque() for _ in ranks]  # lines not decided yet
        self.ready: list[str] = []
        self._touched: dict[int, _Group] = {}  # groups with lines not decided yet
        self._added: float | None = None  # the clock of the last add

    def _group(self, members: list[int]) -> _Group:
        group = _Group(members)
        ranks = [self.ranks[i] for i in members]
        group.label = ranks_label(ranks) + (f" ({len(ranks)})" if len(ranks) > 1 else "")
        return group

    def add(self, fed: Iterable[Fed], now: float | None) -> None:
        """``now``: the caller's clock, or None before it has one (the next :meth:`tick`'s time
        then counts as these lines' arrival). Lines are only queued here; the groups decide
        when lines are taken (:meth:`take`, :meth:`tick`, :meth:`flush`): once per group and
        write, not once per rank's line."""
        touched = self._touched
        for item in fed:
            self.pending[item.index].extend((item.stream, line) for line in item.last(item.count))
            group = self.group_of[item.index]
            touched[id(group)] = group
            if group.since is None:
                _stamp(group, now)
        self._added = now

    def _settle(self) -> None:
        """Decide every group that got lines since the last look."""
        while self._touched:
            touched, self._touched = self._touched, {}
            for group in touched.values():
                self._decide(group, self._added)

    def _decide(self, group: _Group, now: float | None) -> None:
        """Show the lines every member printed, splitting the group where they differ."""
        while True:
            queues = [self.pending[m] for m in group.members]
            depth = min(map(len, queues))
            if not depth:
                break
            for _ in range(depth):
                popped = [q.popleft() for q in queues]
                line = popped[0]
                if popped.count(line) == len(popped):  # the common case: they agree
                    self.ready.append(_tag(group.label, *line))
                    continue
                self._split(group, popped, now)
                break
            else:
                break
        if any(self.pending[m] for m in group.members):
            if group.since is None:
                _stamp(group, now)
        else:
            group.since, group.unstamped = None, False

    def _split(self, group: _Group, popped: list[tuple[str, str]], now: float | None) -> None:
        """The members printed different lines (``popped``, in member order): the largest part
        (on a tie, the lowest rank's) stays the group, every other part becomes one."""
        parts: dict[tuple[str, str], list[int]] = {}
        for member, line in zip(group.members, popped, strict=True):
            parts.setdefault(line, []).append(member)
        ordered = sorted(parts.items(), key=lambda part: (-len(part[1]), part[1][0]))
        group.members = ordered[0][1]
        self._relabel(group)
        for (stream, text), members in ordered:
            target = group if members is group.members else self._split_off(members, now)
            self.ready.append(_tag(target.label, stream, text))
        for other in [self.group_of[members[0]] for _, members in ordered[1:]]:
            self._decide(other, now)

    def _relabel(self, group: _Group) -> None:
        group.label = self._group(group.members).label

    def _split_off(self, members: list[int], now: float | None) -> _Group:
        new = self._group(members)
        self.groups.append(new)
        for m in members:
            self.group_of[m] = new
        if any(self.pending[m] for m in members):
            _stamp(new, now)
        return new

    def tick(self, now: float) -> None:
        """Unfold the laggards of a group whose next line waited HOLD seconds for them."""
        self._settle()
        for group in list(self.groups):
            if group.unstamped:
                group.since, group.unstamped = now, False
            if group.since is None or now - group.since < HOLD:
                continue
            laggards = [m for m in group.members if not self.pending[m]]
            if laggards and len(laggards) < len(group.members):
                group.members = [m for m in group.members if self.pending[m]]
                self._relabel(group)
                self._split_off(laggards, now)
            self._decide(group, now)

    def take(self, limit: int) -> list[str]:
        """At most ``limit`` lines ready, oldest first."""
        self._settle()
        out, self.ready = self.ready[:limit], self.ready[limit:]
        return out

    def flush(self) -> list[str]:
        """The end of the run: every line still held, under its group."""
        self._settle()
        while any(g.since is not None for g in self.groups):
            for group in list(self.groups):
                if group.since is not None:
                    group.since, group.unstamped = float("-inf"), False
            self.tick(0.0)
        out, self.ready = self.ready, []
        return out


def _stamp(group: _Group, now: float | None) -> None:
    group.since, group.unstamped = (0.0, True) if now is None else (now, False)


def _tag(label: str, stream: str, text: str) -> str:
    return f"[{label}{':err' if stream == ERR else ''}] {text}"
