"""Lines of a rank's output as views show and keep them: ``\\r`` applied, long lines cut, a
bounded tail (:class:`Tail`) and the lines one chunk completed (:class:`Fed`).

Pure: no I/O, no state beyond the objects. Used by the run model (:mod:`.model`) and the
text renderer (:mod:`.render`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

TAIL_LINES = 200  # lines kept per rank (saved output, widgets)
TAIL_CHARS = 64_000  # characters kept per rank: 200 long lines must not pin megabytes
LINE_CHARS = 2000  # a longer line is cut where it is shown or kept (never in the log)


def last_segment(line: str) -> tuple[int, int]:
    """Where the last non-empty ``\\r``-separated segment of ``line`` starts and ends."""
    end = len(line)
    while True:
        cut = line.rfind("\r", 0, end)
        if cut < 0:
            return 0, end
        if cut + 1 < end:
            return cut + 1, end
        end = cut


def visible(line: str) -> str:
    """What a terminal shows for ``line``: the text after its last ``\\r`` (trailing ``\\r`` ignored)."""
    if "\r" not in line:
        return line
    start, end = last_segment(line)
    return line[start:end]


def clip(line: str, dropped: int = 0, limit: int = LINE_CHARS) -> str:
    """``line`` cut to ``limit`` characters, saying how many more it had (``dropped``
    characters were already cut off before it reached us)."""
    if len(line) + dropped <= limit:
        return line
    return line[:limit] + f" … (+{len(line) + dropped - limit} chars)"


def shown(line: str, dropped: int = 0) -> str:
    """A line as views show it: ``\\r`` applied, cut to :data:`LINE_CHARS`.

    ``dropped``: characters of the line's first segment we did not keep."""
    if "\r" in line:
        start, end = last_segment(line)
        if start:  # a later segment replaced the one whose characters were dropped
            dropped = 0
        line = line[start:end]
    return clip(line, dropped)


class Tail:
    """The last lines of a rank, as ``(stream, line)``, bounded in lines and characters."""

    __slots__ = ("_lines", "chars", "max_chars", "max_lines")

    def __init__(self, max_lines: int = TAIL_LINES, max_chars: int = TAIL_CHARS) -> None:
        self._lines: deque[tuple[str, str]] = deque()
        self.chars = 0
        self.max_lines = max_lines
        self.max_chars = max_chars

    def extend(self, stream: str, lines: Iterable[str]) -> None:
        for line in lines:
            self._lines.append((stream, line))
            self.chars += len(line)
        lines_ = self._lines
        while len(lines_) > self.max_lines or (self.chars > self.max_chars and len(lines_) > 1):
            self.chars -= len(lines_.popleft()[1])

    def last(self, n: int) -> list[tuple[str, str]]:
        """The last ``n`` lines, oldest first."""
        if n <= 0:
            return []
        if n >= len(self._lines):
            return list(self._lines)
        out = []
        for item in reversed(self._lines):
            out.append(item)
            if len(out) == n:
                break
        out.reverse()
        return out

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._lines)

    def __len__(self) -> int:
        return len(self._lines)

    def __bool__(self) -> bool:
        return bool(self._lines)


@dataclass
class Fed:
    """Complete lines one event added to one rank's stream, kept as the chunk they came in.

    The lines are ``(prefix + text[:end]).split("\n")``: ``prefix`` is the rank's
    unfinished line before this chunk (``dropped`` more characters of it were not
    kept), ``end`` the position of the chunk's last newline. Splitting (or even
    copying) millions of lines is what makes a flood slow, so consumers take only
    the lines they show: :meth:`last`, :meth:`first` (both :func:`shown`).
    """

    index: int
    stream: str
    prefix: str
    text: str
    end: int
    count: int
    dropped: int = 0

    def last(self, n: int) -> list[str]:
        """The last ``n`` lines as a terminal shows them (``\r`` applied, long lines cut)."""
        if n <= 0 or self.count <= 0:
            return []
        if self.count == 1 and not self.prefix and not self.dropped:  # one whole line: most chunks
            line = self.text[: self.end]
            return [shown(line) if len(line) > LINE_CHARS or "\r" in line else line]
        if n >= self.count:
            lines = (self.prefix + self.text[: self.end]).split("\n")
            first = shown(lines[0], self.dropped)
            return [
                first,
                *(shown(line) if len(line) > LINE_CHARS or "\r" in line else line for line in lines[1:]),
            ]
        # n < count: the last n lines all lie in text (n newlines back from end)
        start = self.end
        for _ in range(n):
            start = self.text.rfind("\n", 0, start)
        lines = self.text[start + 1 : self.end].split("\n")
        return [shown(line) if len(line) > LINE_CHARS or "\r" in line else line for line in lines]

    def first(self) -> str:
        """The first line as a terminal shows it."""
        cut = self.text.find("\n", 0, self.end)
        return shown(self.prefix + self.text[: cut if cut >= 0 else self.end], self.dropped)
