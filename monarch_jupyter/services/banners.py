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
        self._out, self._log, self._diverted = out, log, False

    def write(self, text: str) -> int:
        if text.startswith(BANNER) or (self._diverted and text == "\n"):
            self._diverted = not self._diverted if text == "\n" else True
            if self._log is not None:
                with contextlib.suppress(OSError), open(self._log, "a", encoding="utf-8") as log:
                    log.write(text)
            return len(text)
        self._diverted = False
        return self._out.write(text)

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
