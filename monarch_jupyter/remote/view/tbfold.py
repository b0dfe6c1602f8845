"""Identical tracebacks across ranks, shown once under their rank set (pure: no I/O, no threads).

A rank's stderr lines from ``Traceback (most recent call last):`` to its exception line (with
the chained ``During handling …`` blocks after it) are held until no running rank could print
the same one (at most :data:`WAIT` seconds); blocks of the same text fold into one, which the renderer labels with
every rank that printed it. Why: one error on every rank of a DDP cell printed the same twenty
lines once per rank. Only held, never dropped: a block too long or never ended is let through.
"""

from __future__ import annotations

from dataclasses import dataclass, field

HEADER = "Traceback (most recent call last):"
CHAINED = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
HOLD = 0.5  # seconds after a running rank's exception line before its block counts as complete
WAIT = 2.0  # seconds a complete block waits for the same one from ranks still running
BLOCK_LINES = 200  # a longer block is let through as it came (it is not a traceback worth folding)


@dataclass
class _Open:
    lines: list[str]
    at: float | None  # when its last line came (None: before the view's first tick, the next one's)
    ended: bool = False  # its exception line came: a line that is not part of it closes it


@dataclass
class Folded:
    """One traceback and the ranks (indices, in the order they printed it) that printed it."""

    lines: tuple[str, ...]
    ranks: list[int] = field(default_factory=list)
    at: float | None = None  # when its latest rank's last line came (None: see _Open.at)


class TracebackFold:
    """Holds each rank's traceback until the same one from other ranks can join it."""

    def __init__(self) -> None:
        self._open: dict[int, _Open] = {}  # rank index -> its traceback so far
        self._closed: dict[tuple[str, ...], Folded] = {}  # traceback text -> the ranks that printed it

    def wants(self, index: int, text: str) -> bool:
        """Whether rank ``index``'s stderr chunk ``text`` goes through :meth:`feed` (it is in a
        traceback, or starts one); the others pass as they are, unsplit."""
        return index in self._open or HEADER in text

    def feed(self, index: int, lines: list[str], now: float | None) -> list[str]:
        """Rank ``index``'s stderr ``lines``: those to show now, in order (the rest are held)."""
        out: list[str] = []
        for line in lines:
            held = self._open.get(index)
            if held is None:
                if line.strip() == HEADER:
                    self._open[index] = _Open([line], now)
                else:
                    out.append(line)
                continue
            stripped = line.strip()
            joins = stripped == HEADER or stripped in CHAINED  # a chained exception's block follows
            if held.ended and stripped and not joins:
                self._close(index)  # the block is over: this line is the rank's next
                out.extend(self.feed(index, [line], now))
                continue
            held.lines.append(line)
            held.at = now
            if joins:
                held.ended = False
            elif stripped and not line[:1].isspace():
                held.ended = True  # `KeyError: 'missing'`: the exception line
            if len(held.lines) > BLOCK_LINES:
                out.extend(self._open.pop(index).lines)
        return out

    def _close(self, index: int) -> None:
        held = self._open.pop(index)
        while held.lines and not held.lines[-1].strip():
            held.lines.pop()
        key = tuple(held.lines)
        folded = self._closed.setdefault(key, Folded(key))
        folded.ranks.append(index)
        if held.at is not None:  # WAIT counts from the latest block's last line
            folded.at = held.at if folded.at is None else max(folded.at, held.at)

    def ready(
        self, now: float, live: set[int] | frozenset[int] = frozenset(), force: bool = False
    ) -> list[Folded]:
        """The folded tracebacks to show now, in the order they came: a block is complete HOLD
        after its exception line (at once when its rank is done), and shown once no rank still
        running (``live``) could print it too, or WAIT after it came; ``force`` (the run
        ended): every one, unfinished blocks too."""
        for held in self._open.values():
            held.at = now if held.at is None else held.at
        for folded in self._closed.values():
            folded.at = now if folded.at is None else folded.at
        for index, held in list(self._open.items()):
            assert held.at is not None
            if force or (held.ended and (index not in live or now - held.at >= HOLD)):
                self._close(index)
        due = [
            key
            for key, folded in self._closed.items()
            if force or not live.difference(folded.ranks) or now - (folded.at or now) >= WAIT
        ]
        return [self._closed.pop(key) for key in due]

    def __bool__(self) -> bool:
        return bool(self._open or self._closed)
