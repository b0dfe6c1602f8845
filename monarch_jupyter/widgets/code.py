"""The anywidget modules' code, as ``jlpm build:widgets`` writes it from labextension/widgets/*.ts
(and the grid's run.css, from labextension/widgets/run.css)."""

from __future__ import annotations

from pathlib import Path

from ..errors import MonarchJupyterError


class NotBuilt(MonarchJupyterError, FileNotFoundError):
    """A widget module missing from a source checkout: its front end was never built."""


def read_code(path: Path) -> str:
    """``path``'s text; a missing built module says how to build it, in one line."""
    try:
        return path.read_text()
    except FileNotFoundError:
        raise NotBuilt(f"{path} is not built: run `jlpm build` in labextension/") from None
