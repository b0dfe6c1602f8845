"""The run log: every line of every rank, in arrival order, in one file.

Labelling each of millions of lines would triple the bytes written, so the
log is framed like ``tail -f`` of several files: a header names the rank (and
stream) whenever the source changes, followed by that rank's raw lines::

    ==> [#] <==
    %%remote bash on mesh hosts (2 ranks): 'seq 3'
    ==> [hosts=0] <==
    1
    2
    ==> [hosts=1:err] <==
    warning: x
    ==> [hosts=0] <==
    3
    ==> [#] <==
    hosts=1: worker process 123 died

Only complete lines are written (a rank's unfinished line waits for its
newline or the end of the run), so ranks never interleave inside a line.
A rank's line that would read as a header (``==> [``, after any backslashes) gets one more
leading backslash (as mbox quotes ``From``), so no rank can forge another's section;
:func:`read_log` takes it off again.

Bounded per rank and stream: the first ``HEAD_BYTES`` are written as they come; after
them only the last ``TAIL_BYTES`` are kept (in memory, whole lines) and written at the
end after a note of how many bytes were skipped. The host keeps its own last 64 MiB
(``%remote attach`` replays them).
:func:`read_log` parses it back. Pure file I/O: no Monarch, no threads.
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...system.files import private_opener
from ..view.model import OUT

HEADER = "==> [{}] <=="
_FIRST = re.compile(rb"==> \[([^\]\n]*)\] <==(?=\n|$)")  # a header at the start of the log
_HEADERS = re.compile(rb"\n==> \[([^\]\n]*)\] <==(?=\n|$)")  # … after a line (a literal prefix: a fast scan)
_LOOKS_LIKE_HEADER = re.compile(rb"^(\\*==> \[)", re.MULTILINE)  # a rank's line, quoted with a backslash
_ARROW = re.compile(rb"==> \[")  # searched in each block (a memoryview: no copy)
_QUOTED = re.compile(r"\\+==> \[")
NOTE = (-1, "#")
FLUSH_EVERY = 0.5  # seconds: keep `tail -f` on the log useful
HEAD_BYTES = 16 << 20  # written live per rank and stream
TAIL_BYTES = 1 << 20  # then only the last ones, written when the run ends


class _Tail:
    """A rank stream's bytes past the head: the newest ones, at most about ``TAIL_BYTES``."""

    def __init__(self) -> None:
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.skipped = 0

    def add(self, block: bytes, keep: int) -> None:
        self.chunks.append(block)
        self.size += len(block)
        while len(self.chunks) > 1 and self.size - len(self.chunks[0]) >= keep:
            dropped = self.chunks.popleft()
            self.size -= len(dropped)
            self.skipped += len(dropped)

    def kept(self, keep: int) -> bytes:
        """The last ``keep`` bytes or fewer, from a line's start; what is cut is counted as skipped."""
        data = b"".join(self.chunks)
        if len(data) > keep:
            cut = data[-keep:]
            start = cut.find(b"\n")
            cut = cut[start + 1 :] if 0 <= start < len(cut) - 1 else cut
            self.skipped += len(data) - len(cut)
            data = cut
        return data


class Spool:
    """Writes bytes: each chunk is encoded once and its complete lines written as a slice
    (no joining with the previous partial line, no cut copies)."""

    def __init__(
        self, path: str | os.PathLike[str], labels: list[str], head: int = HEAD_BYTES, tail: int = TAIL_BYTES
    ) -> None:
        self.labels = labels
        self.head, self.tail = head, tail
        self.sizes: dict[tuple[int, str], int] = {}  # bytes written live per rank stream
        self.tails: dict[tuple[int, str], _Tail] = {}  # rank streams past their head
        self.file = open(path, "wb", buffering=1 << 20, opener=private_opener)  # noqa: SIM115 - held for the run, closed by close()
        self.headers = [
            (
                (HEADER.format(label) + "\n").encode("utf-8", "replace"),
                (HEADER.format(label + ":err") + "\n").encode("utf-8", "replace"),
            )
            for label in labels
        ]
        self.partial: dict[tuple[int, str], bytes] = {}
        self.replaced: set[tuple[int, str]] = set()  # rank streams with U+FFFD: maybe invalid UTF-8
        self.current: tuple[int, str] | None = None
        self.flushed = time.monotonic()

    def write(self, index: int, stream: str, text: str | bytes) -> None:
        key = (index, stream)
        if isinstance(text, str):
            if "\ufffd" in text:  # said once per rank stream when the log closes
                self.replaced.add(key)
            data = text.encode("utf-8", "replace")
        else:
            data = text
        cut = data.rfind(b"\n")
        if cut < 0:
            data = self.partial.pop(key, b"") + data  # only unfinished lines are joined
            if len(data) < 1 << 16:
                self.partial[key] = data
            else:  # a huge line without newline: write it as it stands
                self._emit(key, b"", data, b"\n")
            return
        if cut == len(data) - 1 and key not in self.partial:  # whole lines, nothing pending: most chunks
            self._emit_whole(key, data)
            return
        view = memoryview(data)
        self._emit(key, self.partial.pop(key, b""), view[: cut + 1])
        if cut + 1 < len(data):
            self.partial[key] = bytes(view[cut + 1 :])

    def _emit_whole(self, key: tuple[int, str], data: bytes) -> None:
        """:meth:`_emit` of one block of whole lines, the usual case, in fewer steps."""
        written = self.sizes.get(key, 0) + len(data)
        if written > self.head or key in self.tails or _ARROW.search(data):
            self._emit(key, data)
            return
        self.sizes[key] = written
        if key != self.current:
            self.current = key
            self.file.write(self.headers[key[0]][0 if key[1] == OUT else 1])
        self.file.write(data)

    def _emit(self, key: tuple[int, str], *blocks: Any) -> None:
        size = 0
        for block in blocks:  # (a loop: a generator costs more than the 2-3 blocks it sums)
            size += len(block)
        written = self.sizes.get(key, 0)
        if key in self.tails or written + size > self.head:
            tail = self.tails.setdefault(key, _Tail())
            for block in blocks:
                if block:
                    tail.add(bytes(block), self.tail)
            return
        self.sizes[key] = written + size
        self._write(key, *blocks)

    def _write(self, key: tuple[int, str], *blocks: Any) -> None:
        if key != self.current:
            self.current = key
            self.file.write(self.headers[key[0]][0 if key[1] == OUT else 1])
        if any(_ARROW.search(block) for block in blocks):  # rare: the slow path quotes it
            blocks = (_LOOKS_LIKE_HEADER.sub(rb"\\\1", b"".join(bytes(b) for b in blocks)),)
        for block in blocks:
            if block:
                self.file.write(block)

    def note(self, line: str) -> None:
        """A line from us (not a rank): run header, stops, lost workers."""
        if self.current != NOTE:
            self.current = NOTE
            self.file.write((HEADER.format("#") + "\n").encode())
        self.file.write((line.replace("\n", " ") + "\n").encode("utf-8", "replace"))

    def maybe_flush(self) -> None:
        now = time.monotonic()
        if now - self.flushed > FLUSH_EVERY:
            self.file.flush()
            self.flushed = now

    def close(self) -> None:
        for key, rest in sorted(self.partial.items()):
            self._emit(key, rest, b"\n")
        self.partial.clear()
        for key, tail in sorted(self.tails.items()):
            data = tail.kept(self.tail)
            stream = "stdout" if key[1] == OUT else "stderr"
            self.note(
                f"{self.labels[key[0]]}: {tail.skipped} bytes of {stream} skipped here (the log keeps the "
                f"first {self.head} and the last {self.tail} bytes per rank and stream)"
            )
            self._write(key, data)
        self.tails.clear()
        for key in sorted(self.replaced):
            stream = "stdout" if key[1] == OUT else "stderr"
            self.note(
                f"{self.labels[key[0]]}: its {stream} has U+FFFD here: bytes that were not UTF-8 are "
                "replaced by it (the host's out/err files of the run keep the bytes)"
            )
        self.file.close()


def frames(data: bytes) -> Iterator[tuple[str, int, int]]:
    """The log's blocks: ``(source, start, end)``, the header's label (``hosts=0``, ``hosts=0:err``,
    ``#`` for notes) and where the block's lines are in ``data``. The one reader of the framing."""
    source, start = "#", 0
    first = _FIRST.match(data)
    if first is not None:
        source, start = first.group(1).decode("utf-8", "replace"), first.end() + 1
    names: dict[bytes, str] = {}  # a log has few labels and many headers
    for header in _HEADERS.finditer(data, max(0, start - 1)):
        at, end = header.span()
        if at + 1 > start:
            yield source, start, at + 1
        raw = header.group(1)
        source = names.get(raw) or names.setdefault(raw, raw.decode("utf-8", "replace"))
        start = end + 1
    if len(data) > start:
        yield source, start, len(data)


def read_log(path: str | os.PathLike[str]) -> dict[str, list[str]]:
    """``{"hosts=0": [lines…], "hosts=0:err": [lines…], "#": [notes…]}`` from a run log."""
    result: dict[str, list[str]] = {"#": []}
    data = Path(path).read_bytes()
    for source, start, end in frames(data):
        text = data[start:end].decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
        lines = text.removesuffix("\n").split("\n")
        result.setdefault(source, []).extend(line[1:] if _QUOTED.match(line) else line for line in lines)
    return result
