"""The dashboard's link, which Monarch ``print``s (Python's ``sys.stdout``, not fd 1), goes to
the apply log instead of the cell; every other write passes on unchanged."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

BANNER = "Monarch Dashboard: "


class _Filter:
    """A stand-in for ``sys.stdout``: a write starting with :data:`BANNER` (and the newline
    ``print`` writes after it) goes to ``log``, the rest to ``out``."""

    def __init__(self, out: TextIO, log: Path | None) -> None:
        self._out, self._log, self._held = out, log, ""

    def write(self, text: str) -> int:
        if text.startswith(BANNER) or (self._held and text == "\n"):
            self._held += text
            if self._held.endswith("\n"):  # one append: other writers of the log never split it
                self._append()
            return len(text)
        if self._held:  # a banner print()ed without its newline: logged as it stands
            self._held += "\n"
            self._append()
        return self._out.write(text)

    def _append(self) -> None:
        line, self._held = self._held, ""
        if self._log is not None:
            with contextlib.suppress(OSError), open(self._log, "a", encoding="utf-8") as log:
                log.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._out, name)


@contextlib.contextmanager
def to_log(log: Path | None) -> Iterator[None]:
    """For the duration, the dashboard's banner on ``sys.stdout`` goes to ``log`` (None: dropped)."""
    saved = sys.stdout
    sys.stdout = _Filter(saved, log)
    try:
        yield
    finally:
        sys.stdout = saved
