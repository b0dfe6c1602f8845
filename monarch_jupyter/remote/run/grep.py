"""``%remote grep``: a run's lines matching a pattern, by rank and line number, ranks with the
same hits folded as ``--group`` folds outputs (pure: no Monarch, no threads).

The kernel's run log (:mod:`.spool`, read through its one parser :func:`.spool.frames`) is
searched by rank stream; where the log skipped bytes of a stream (past its head) or there is
no kernel log (a detached run), the verb asks the hosts, whose rank files the same matcher
(:func:`.host.search.search`) searches there. Text::

    run 20261201-101500-abc123 ('python train.py'): /nan/ in 2 of 8 rank streams, 3 lines
    hosts=[2,5] (2):
        41- step 40
        42: loss nan
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...system.files import read_bytes
from ..host.search import MAX_HITS, Hit, folded, search
from ..view.quiet import ranks_label
from ..wire.protocol import OUT
from .index import RankRef
from .spool import frames

LOG_LIMIT = 8 << 30  # bytes of a kernel log read (the spool bounds it per rank and stream)
INDENT = "    "
_SKIPPED = re.compile(r"^(.*): \d+ bytes of (stdout|stderr) skipped here", re.MULTILINE)


@dataclass(frozen=True)
class Found:
    """One rank stream's hits."""

    rank: RankRef
    stream: str  # OUT or ERR
    hits: tuple[Hit, ...]
    count: int  # matching lines (hits keeps MAX_HITS; counting stops at MAX_HITS + 1)
    whole: bool = True  # line numbers count from the stream's first line


def sources(
    data: bytes, regex: re.Pattern[bytes] | None = None, wanted: set[str] | None = None
) -> tuple[dict[str, bytes], set[str]]:
    """The log's text per source (``hosts=0``, ``hosts=0:err``), and the sources whose middle
    the log skipped (their line numbers past the skip are not the rank's). With ``regex``: only
    the sources (of ``wanted``) with a match somewhere, found block by block without copying, so
    a rare pattern joins the text of a few ranks, not of all."""
    blocks: dict[str, list[tuple[int, int]]] = {}
    skipped: set[str] = set()
    for source, start, end in frames(data):
        if source == "#":
            for label, stream in _SKIPPED.findall(data[start:end].decode("utf-8", "replace")):
                skipped.add(label if stream == "stdout" else f"{label}:err")
        elif wanted is None or source in wanted:
            blocks.setdefault(source, []).append((start, end))
    if regex is not None:
        haystack, pattern = folded(data, regex)
        blocks = {
            source: spans
            for source, spans in blocks.items()
            if any(pattern.search(haystack, start, end) for start, end in spans)
        }
    return {
        source: _unquoted(b"".join([data[a:b] for a, b in spans])) for source, spans in blocks.items()
    }, skipped


_QUOTED = re.compile(rb"^\\(\\*==> \[)", re.MULTILINE)  # spool quotes a rank's header-like line


def _unquoted(text: bytes) -> bytes:
    """A rank stream's lines as the rank printed them (the log's one backslash removed)."""
    return _QUOTED.sub(rb"\1", text) if b"\\==> [" in text else text


def grep_log(
    path: Path, regex: re.Pattern[bytes], context: int, ranks: Iterable[RankRef], streams: Iterable[str]
) -> tuple[list[Found], set[tuple[int, str]]]:
    """Search the kernel log ``path``: hits of ``ranks``' ``streams``; and the (rank, stream)
    the log did not keep whole (ask the hosts for those)."""
    pairs = [
        (rank, stream, rank.label if stream == OUT else f"{rank.label}:err")
        for rank in ranks
        for stream in streams
    ]
    texts, skipped = sources(
        read_bytes(path, LOG_LIMIT, "run log"), regex, {source for _, _, source in pairs}
    )
    found, partial = [], set()
    for rank, stream, source in pairs:
        hits, count = search(texts[source], regex, context) if source in texts else ([], 0)
        found.append(Found(rank, stream, tuple(hits), count, source not in skipped))
        if source in skipped:
            partial.add((rank.rank, stream))
    return found, partial


def from_hosts(answers: Iterable[Iterable[Mapping[str, Any]]], ranks: Iterable[RankRef]) -> list[Found]:
    """The hosts' answers (:func:`.host.search.grep_run`) as :class:`Found`, once per rank stream."""
    by_key = {(r.mesh, r.rank): r for r in ranks}
    found: dict[tuple[str, int, str], Found] = {}
    for host in answers:
        for answer in host:
            rank = by_key.get((str(answer.get("key")), int(answer.get("rank") or 0)))
            if rank is None:
                continue
            hits = tuple((int(n), bool(m), str(t)) for n, m, t in answer.get("hits") or [])
            item = Found(
                rank,
                str(answer.get("stream")),
                hits,
                int(answer.get("count") or 0),
                bool(answer.get("whole")),
            )
            found.setdefault((rank.mesh, rank.rank, item.stream), item)
    return [found[k] for k in sorted(found)]


def render(run_id: str, command: str, pattern: str, found: list[Found], where: str) -> str:
    """The verb's text: a header line, then each group of rank streams with the same hits."""
    matched = [f for f in found if f.count]
    lines_in_all = sum(min(f.count, MAX_HITS) for f in matched)
    more = "+" if any(f.count > MAX_HITS for f in matched) else ""
    head = (
        f"run {run_id} ({command!r}): /{pattern}/ in {len(matched)} of {len(found)} rank streams, "
        f"{lines_in_all}{more} line{'s' if lines_in_all != 1 else ''} ({where})"
    )
    if not matched:
        return head + "\n"
    groups: dict[tuple[str, tuple[Hit, ...], int, bool], list[Found]] = {}
    for item in matched:
        groups.setdefault((item.stream, item.hits, item.count, item.whole), []).append(item)
    out = [head]
    for (stream, hits, count, whole), members in sorted(groups.items(), key=lambda g: -len(g[1])):
        size = f" ({len(members)})" if len(members) > 1 else ""
        out.append(f"{ranks_label(m.rank for m in members)}{size}{'' if stream == OUT else ', stderr'}:")
        if not whole:
            out.append(f"{INDENT}(line numbers count from the part kept, not the rank's first line)")
        out += [f"{INDENT}{n}{':' if match else '-'} {text}" for n, match, text in hits]
        if count > MAX_HITS:
            out.append(f"{INDENT}… more matching lines (the first {MAX_HITS} are shown)")
    return "\n".join(out) + "\n"
