"""``%autoremote on [NAME] | off``: every following cell runs in session NAME's namespaces, as if
it began with ``%%remote python --session NAME`` (ipyparallel's ``%autopx``).

An IPython input transformer (``input_transformers_cleanup``) puts that line in front of each
cell; a cell that starts with ``%`` or ``!`` (a magic, ``%autoremote off`` among them, or a shell
escape) still runs in the kernel, so ``%remote pull``, ``%job status`` and turning it off work
while it is on. The cell's line numbers stay the notebook's (``--cell-line 1``).
"""

from __future__ import annotations

import re
from typing import Any

from ...text.parser import ArgumentsError
from ..view.args import DEFAULT_SESSION

USAGE = "%autoremote on [NAME] | off"
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,39}")


class AutoRemote:
    """The transformer: a cell's lines, with the session's ``%%remote`` line in front."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.first = f"%%remote python --session {name} --cell-line 1\n"

    def __call__(self, lines: list[str]) -> list[str]:
        for line in lines:
            if line.strip():
                return lines if line.lstrip().startswith(("%", "!")) else [self.first, *lines]
        return lines  # an empty cell stays empty


def current(shell: Any) -> AutoRemote | None:
    for transformer in shell.input_transformers_cleanup:
        if isinstance(transformer, AutoRemote):
            return transformer
    return None


def toggle(shell: Any, line: str) -> str:
    """Turn it on or off for ``shell``; the line to show."""
    words = line.split()
    if not words:
        on = current(shell)
        return f"autoremote is on: cells run in session {on.name}" if on else "autoremote is off"
    if words[0] not in ("on", "off") or len(words) > 2 or (words[0] == "off" and len(words) > 1):
        raise ArgumentsError(f"usage: {USAGE}")
    shell.input_transformers_cleanup[:] = [
        t for t in shell.input_transformers_cleanup if not isinstance(t, AutoRemote)
    ]
    if words[0] == "off":
        return "autoremote off: cells run in the kernel"
    name = words[1] if len(words) > 1 else DEFAULT_SESSION
    if not NAME.fullmatch(name):
        raise ArgumentsError(f"%autoremote: bad session name {name!r}")
    shell.input_transformers_cleanup.append(AutoRemote(name))
    return (
        f"autoremote on: every cell runs in session {name} on every rank "
        "(cells starting with % or ! run here; %autoremote off stops it)"
    )
