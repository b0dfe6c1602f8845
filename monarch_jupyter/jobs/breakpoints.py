"""The record of ranks waiting at a breakpoint, shared by every kernel of a folder.

A kernel writes ``<context>/.../actors/debug/<kernel pid>-<actor>-<rank>.json`` when one of
its ranks stops (at a breakpoint, or post-mortem after an error), rewrites it when the cell that
was running then ends, and removes it when the rank goes on; ``%remote debug`` of any kernel lists
them (:func:`waiting_text`). Records of a kernel that is gone are not shown (and are removed).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from ..system.files import private_dir, read_small, write_atomic

FOLDER = ("actors", "debug")


def folder_of(session: Any) -> Path | None:
    """The record folder of ``session``'s context (a JobContext); None when it has none."""
    try:
        return Path(session.layout.context_dir(session.context)).joinpath(*FOLDER)
    except (AttributeError, OSError, ValueError, TypeError):
        return None


def _path(folder: Path, actor: str, rank: int) -> Path:
    return folder / f"{os.getpid()}-{actor}-{rank}.json"


def write(
    folder: Path,
    actor: str,
    rank: int,
    label: str,
    where: str,
    cell: int | None = None,
    running: bool = False,
    error: str = "",
) -> None:
    """The record of ``label`` of ``actor`` stopped at ``where``: ``cell`` the kernel's cell that
    was running when it stopped (None: none), ``running`` whether that cell still runs (rewritten
    when it ends), ``error`` what it raised when the stop is a post-mortem one."""
    with contextlib.suppress(OSError, ValueError):
        private_dir(folder)
        entry = {
            "pid": os.getpid(),
            "actor": actor,
            "rank": label,
            "where": where,
            "cell": cell,
            "running": running,
            "error": error,
        }
        write_atomic(_path(folder, actor, rank), json.dumps(entry).encode())


def remove(folder: Path, actor: str, rank: int) -> None:
    with contextlib.suppress(OSError):
        _path(folder, actor, rank).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def waiting(folder: Path) -> list[dict[str, Any]]:
    """The records of ranks still waiting, by kernel and rank; stale ones removed."""
    out: list[dict[str, Any]] = []
    with contextlib.suppress(OSError):
        for path in sorted(folder.glob("*.json")):
            data = read_small(path)
            try:
                entry = json.loads(data or b"")
                pid = int(entry["pid"])
            except (ValueError, KeyError, TypeError):
                continue
            if not _alive(pid):
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            out.append(entry)
    return out


def waiting_text(folder: Path | None) -> str:
    """``%remote debug``'s text: one line a waiting rank (where, which kernel, which cell, whether
    that cell still runs), or that none waits."""
    entries = waiting(folder) if folder is not None else []
    if not entries:
        return "no rank is waiting at a breakpoint in this context\n"
    return "".join(_entry_line(e) + "\n" for e in entries)


def _entry_line(e: dict[str, Any]) -> str:
    error = e.get("error") or ""
    what = f"stopped after {error} at" if error else "stopped at"
    head = f"{e.get('rank', '?')} of {e.get('actor', '?')} {what} {e.get('where', '?')}"
    kernel = "this kernel" if int(e["pid"]) == os.getpid() else f"kernel pid {e['pid']}"
    cell = e.get("cell")
    if not isinstance(cell, int):
        return (
            f"{head} ({kernel}; no cell was running: a cell waiting on the call with .get() gets its prompt)"
        )
    if e.get("running"):
        return f"{head} ({kernel}; cell [{cell}] is running: its prompt opens while it waits with .get())"
    return (
        f"{head} ({kernel}; cell [{cell}], running when it stopped, has ended: a cell waiting on the "
        "call with .get() gets its prompt; %job kill frees it)"
    )
