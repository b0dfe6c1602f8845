"""Search a rank's output: the lines matching a pattern, with context (``%remote grep``).

:func:`search` is the one matcher, over bytes, for the kernel's run log (``remote/run/grep.py``)
and the hosts' rank files (:func:`grep_run`, the host's answer). It runs the regular
expression over the whole text (C speed) and counts newlines only between hits: no Python
loop over lines. Standard library only: it travels to the workers.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ...system.files import read_fd
from ..wire.protocol import ERR, OUT, GrepQuery
from .dumps import rank_folders

MAX_HITS = 1000  # matching lines kept per rank and stream (the rest only counted)
LINE_CHARS = 400  # characters kept of a line shown
READ_LIMIT = 64 << 20  # bytes of a host's rank file searched (its newest; the host keeps as many)

Hit = tuple[int, bool, str]  # (line number from 1, matched (else context), text)


def search(
    data: bytes, pattern: re.Pattern[bytes], context: int = 0, limit: int = MAX_HITS
) -> tuple[list[Hit], int]:
    """The lines of ``data`` that ``pattern`` matches, each with ``context`` lines either side,
    in order and once each; and how many lines matched, counting stops at ``limit`` + 1."""
    hits: dict[int, Hit] = {}
    haystack, pattern = folded(data, pattern)
    count, line, counted, pos = 0, 1, 0, 0
    size = len(data)
    while pos <= size and count <= limit:
        found = pattern.search(haystack, pos)
        if found is None:
            break
        begin = data.rfind(b"\n", 0, found.start()) + 1
        end = data.find(b"\n", found.start())
        end = size if end < 0 else end
        line += data.count(b"\n", counted, begin)
        counted = begin
        count += 1
        if count <= limit:
            _with_context(data, begin, end, line, context, hits)
        pos = end + 1
    return [hits[n] for n in sorted(hits)], count


def folded(data: bytes, pattern: re.Pattern[bytes]) -> tuple[bytes, re.Pattern[bytes]]:
    """Case folded by hand where that means the same (bytes patterns fold ASCII only, as
    ``bytes.lower``; no escapes or classes whose meaning lowering changes): a case-sensitive
    search keeps the regex engine's fast literal scan, several times faster."""
    source = pattern.pattern
    if not pattern.flags & re.IGNORECASE or b"\\" in source or b"[" in source:
        return data, pattern
    return data.lower(), re.compile(source.lower(), pattern.flags & ~re.IGNORECASE)


def _with_context(data: bytes, begin: int, end: int, line: int, context: int, hits: dict[int, Hit]) -> None:
    hits[line] = (line, True, _text(data[begin:end]))
    start, number = begin, line
    for _ in range(context):  # lines before
        if start == 0:
            break
        prev = data.rfind(b"\n", 0, start - 1) + 1
        number -= 1
        hits.setdefault(number, (number, False, _text(data[prev : start - 1])))
        start = prev
    stop, number = end, line
    for _ in range(context):  # lines after
        if stop >= len(data) - 1:
            break
        following = data.find(b"\n", stop + 1)
        following = len(data) if following < 0 else following
        number += 1
        hits.setdefault(number, (number, False, _text(data[stop + 1 : following])))
        stop = following


def _text(line: bytes) -> str:
    text = line.decode("utf-8", "replace").rstrip("\r")
    return text if len(text) <= LINE_CHARS else text[:LINE_CHARS] + "…"


def compile_pattern(pattern: str, ignore_case: bool) -> re.Pattern[bytes]:
    """``pattern`` (a Python regular expression; ``^`` and ``$`` match at each line) for bytes;
    raises ``re.error`` when it is not one."""
    return re.compile(pattern.encode("utf-8"), re.MULTILINE | (re.IGNORECASE if ignore_case else 0))


def read_newest(path: Path, limit: int = READ_LIMIT) -> tuple[bytes, bool]:
    """A rank file's newest ``limit`` bytes from a line's start, without its punched-out head;
    and whether the bytes start at the file's start (so line numbers are the file's)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return b"", True
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - limit)
        try:  # the first byte still on disk (a punched head reads as zeros)
            start = max(start, os.lseek(fd, start, os.SEEK_DATA))
        except OSError:
            start = size
        os.lseek(fd, start, os.SEEK_SET)
        data = read_fd(fd, size - start)
    finally:
        os.close(fd)
    if start > 0:
        data = data[data.find(b"\n") + 1 :]
    return data, start == 0


def grep_run(run_id: str, query: GrepQuery, mine: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Each rank of run ``run_id`` on this host and stream ``query`` chose: ``{"key", "rank",
    "point", "stream", "hits", "count", "whole"}`` (``whole``: line numbers count from the
    file's start)."""
    regex = compile_pattern(query.pattern, query.ignore_case)
    answers = []
    for folder, meta in rank_folders(run_id, query.ranks, None, mine):
        for stream in (s for s in (OUT, ERR) if s in query.streams):
            data, whole = read_newest(folder / stream)
            hits, count = search(data, regex, query.context)
            answers.append(
                {
                    "key": meta.get("key"),
                    "rank": meta.get("rank"),
                    "point": meta.get("point") or {},
                    "stream": stream,
                    "hits": hits,
                    "count": count,
                    "whole": whole,
                }
            )
    return answers
