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
:func:`read_log` parses it back. Pure file I/O: no Monarch, no threads.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .model import OUT

HEADER = "==> [{}] <=="
NOTE = (-1, "#")
FLUSH_EVERY = 0.5  # seconds: keep `tail -f` on the log useful


class Spool:
    def __init__(self, path: str | os.PathLike, labels: list[str]) -> None:
        self.file = open(path, "w", encoding="utf-8", errors="replace", buffering=1 << 20)
        self.headers = [
            (HEADER.format(label) + "\n", HEADER.format(label + ":err") + "\n") for label in labels
        ]
        self.partial: dict[tuple[int, str], str] = {}
        self.current: tuple[int, str] | None = None
        self.flushed = time.monotonic()

    def write(self, index: int, stream: str, text: str) -> None:
        key = (index, stream)
        if key in self.partial:
            text = self.partial.pop(key) + text
        cut = text.rfind("\n")
        if cut < 0:
            if len(text) < 1 << 16:
                self.partial[key] = text
                return
            cut = len(text)  # a huge line without newline: write it as it stands
            text += "\n"
        elif cut + 1 < len(text):
            self.partial[key] = text[cut + 1:]
        self._emit(key, text[:cut + 1])

    def _emit(self, key: tuple[int, str], block: str) -> None:
        if key != self.current:
            self.current = key
            self.file.write(self.headers[key[0]][0 if key[1] == OUT else 1])
        self.file.write(block)

    def note(self, line: str) -> None:
        """A line from us (not a rank): run header, stops, lost workers."""
        if self.current != NOTE:
            self.current = NOTE
            self.file.write(HEADER.format("#") + "\n")
        self.file.write(line.replace("\n", " ") + "\n")

    def maybe_flush(self) -> None:
        now = time.monotonic()
        if now - self.flushed > FLUSH_EVERY:
            self.file.flush()
            self.flushed = now

    def close(self) -> None:
        for key, text in sorted(self.partial.items()):
            self._emit(key, text + "\n")
        self.partial.clear()
        self.file.close()


def read_log(path: str | os.PathLike) -> dict[str, list[str]]:
    """``{"hosts=0": [lines…], "hosts=0:err": [lines…], "#": [notes…]}`` from a run log."""
    result: dict[str, list[str]] = {}
    current: list[str] = result.setdefault("#", [])
    with open(Path(path), encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.removesuffix("\n")
            if line.startswith("==> [") and line.endswith("] <=="):
                current = result.setdefault(line[5:-5], [])
            else:
                current.append(line)
    return result
