"""py-spy's ``dump --json`` as plain, typed data (pure: standard library only, no threads).

A leaf both sides import: the host (:mod:`.host.dumps`) parses and bounds each dump before it
travels, the kernel (:mod:`..view.stacks`) formats and folds the threads. py-spy 0.4's JSON is a list
of its ``StackTrace`` records (``thread_id``, ``thread_name``, ``os_thread_id``, ``active``,
``owns_gil``, ``frames``: ``name``, ``filename``, ``short_filename``, ``line``…), newest thread
first; only what ``%remote stacks`` shows is kept, in the order py-spy's own text dump prints
(oldest thread, usually ``MainThread``, first).
"""

from __future__ import annotations

import json
from typing import Any, TypedDict


class Frame(TypedDict):
    """One frame: its function's qualified name, its file as py-spy shows it (the short form,
    relative to its package), its line (0: a native frame without line information)."""

    name: str
    file: str
    line: int


class Thread(TypedDict):
    """One thread: its id as py-spy's text shows it (the OS thread id, else the Python one in
    hex), its state (``idle``, ``active``, ``active+gil``), its name (None: not a ``threading``
    thread), its frames, innermost first."""

    id: str
    status: str
    name: str | None
    frames: list[Frame]


class DumpError(ValueError):
    """py-spy's output is not the JSON it documents; the message is one line."""


def _field(record: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = record.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
        raise DumpError(f"{where}: {key!r} is {type(value).__name__}")
    return value


def _frame(record: Any, where: str) -> Frame:
    if not isinstance(record, dict):
        raise DumpError(f"{where}: a frame is {type(record).__name__}")
    short = record.get("short_filename")
    return {
        "name": _field(record, "name", str, where),
        "file": short if isinstance(short, str) else _field(record, "filename", str, where),
        "line": _field(record, "line", int, where),
    }


def _thread(record: Any, where: str) -> Thread:
    if not isinstance(record, dict):
        raise DumpError(f"{where} is {type(record).__name__}")
    os_id, name = record.get("os_thread_id"), record.get("thread_name")
    active, gil = _field(record, "active", bool, where), _field(record, "owns_gil", bool, where)
    frames = _field(record, "frames", list, where)
    return {
        "id": str(os_id) if isinstance(os_id, int) else f"0x{_field(record, 'thread_id', int, where):X}",
        "status": ("active+gil" if gil else "active") if active else "idle",
        "name": name if isinstance(name, str) else None,
        "frames": [_frame(f, f"{where}, frame {i}") for i, f in enumerate(frames)],
    }


def parse(text: str | bytes) -> list[Thread]:
    """The threads of one ``py-spy dump --json`` output; :class:`DumpError` if it is not that."""
    try:
        records = json.loads(text)
    except ValueError as error:  # JSONDecodeError, or bytes that are not UTF-8
        raise DumpError(f"not JSON ({error})") from None
    if not isinstance(records, list):
        raise DumpError(f"a {type(records).__name__}, not a list of threads")
    return [_thread(r, f"thread {i}") for i, r in reversed(list(enumerate(records)))]


def lines(threads: list[Thread]) -> int:
    """How many lines the threads take as text: one per thread, one per frame."""
    return sum(1 + len(t["frames"]) for t in threads)


def trim(threads: list[Thread], most: int) -> tuple[list[Thread], int]:
    """``(the threads cut to their first most lines, how many lines were cut)``: a thread whose
    header fits keeps the frames that fit, innermost first."""
    kept: list[Thread] = []
    room = most
    for thread in threads:
        if room < 1:
            break
        kept.append({**thread, "frames": thread["frames"][: room - 1]})
        room -= 1 + len(kept[-1]["frames"])
    return kept, lines(threads) - lines(kept)
