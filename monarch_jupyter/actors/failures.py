"""One text for a call that failed on several ranks (pure: plain data in, text out).

Workers send one :class:`RankFailure` per failing rank (see :mod:`.worker`); the
kernel groups identical tracebacks under the ranks that raised them, names each
frame of notebook-defined code by the cell and line it came from, and leaves out
Monarch's own frames.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ..text.rank_sets import label, rank_set

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
DYNAMIC = "<dynamic-code>"  # cloudpickle's co_filename for code pickled by value
_MONARCH_PARTS = ("/monarch/_src/", "/monarch/_rust_bindings/", "/monarch/actor/")


@dataclass(frozen=True)
class Frame:
    filename: str
    lineno: int
    name: str
    qualname: str = ""
    line: str = ""  # the source line as the worker saw it ('' when it had none)


@dataclass(frozen=True)
class Raised:
    """One exception of a chain: ``relation`` says how it leads to the next one."""

    type: str
    message: str
    frames: tuple[Frame, ...] = ()
    relation: str = ""  # "cause", "context" or "" (the last one)


@dataclass(frozen=True)
class RankFailure:
    point: tuple[tuple[str, int], ...]  # (("hosts", 1),) — the rank in the called mesh
    chain: tuple[Raised, ...]  # oldest first; the last one is what the endpoint raised

    @property
    def label(self) -> str:
        return label(self.point)

    @property
    def last(self) -> Raised:
        return self.chain[-1]


@dataclass
class CallFailure:
    """Every failing rank of one call of ``mesh.method``; ``size``: how many ranks were called."""

    mesh: str
    method: str
    ranks: list[RankFailure] = field(default_factory=list)
    size: int = 0
    original: BaseException | None = None  # the ActorError the call raised


# Where a frame of code defined in the notebook came from: (cell number, line text) or None.
Locate = Callable[[Frame], "tuple[int, str] | None"]


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def internal(frame: Frame) -> bool:
    """A frame of Monarch's own machinery (its endpoint dispatch, ``Future.get``)."""
    return any(part in frame.filename for part in _MONARCH_PARTS)


def frame_lines(frame: Frame, locate: Locate) -> list[str]:
    """The two lines of a traceback entry; notebook code as ``cell [N] line L``."""
    name = frame.qualname or frame.name
    line = frame.line
    where = f'File "{frame.filename}", line {frame.lineno}'
    if frame.filename == DYNAMIC or frame.filename.startswith("<"):
        found = locate(frame)
        if found is not None:
            cell, text = found
            where = f"cell [{cell}] line {frame.lineno}"
            line = line or text
        elif frame.filename == DYNAMIC:
            where = f"notebook code (cell not found), line {frame.lineno}"
    out = [f"  {where}, in {name}"]
    if line.strip():
        out.append(f"    {line.strip()}")
    return out


_JOIN = {
    "cause": "The above exception was the direct cause of the following exception:",
    "context": "During handling of the above exception, another exception occurred:",
}


def chain_lines(chain: Iterable[Raised], locate: Locate) -> list[str]:
    out: list[str] = []
    for raised in chain:
        frames = [f for f in raised.frames if not internal(f)]
        if frames:
            out.append("Traceback (most recent call last):")
            for frame in frames:
                out.extend(frame_lines(frame, locate))
        out.append(exception_line(raised))
        if raised.relation:
            out.extend(["", _JOIN[raised.relation], ""])
    return out


def exception_line(raised: Raised) -> str:
    message = strip_ansi(raised.message)
    return f"{raised.type}: {message}" if message else raised.type


def _group(ranks: list[RankFailure], locate: Locate) -> dict[tuple[str, ...], list[RankFailure]]:
    groups: dict[tuple[str, ...], list[RankFailure]] = {}
    for rank in ranks:
        groups.setdefault(tuple(chain_lines(rank.chain, locate)), []).append(rank)
    return groups


def headline(failure: CallFailure) -> str:
    """One sentence: what was called, on how many ranks it failed, which, with what."""
    ranks = failure.ranks
    of = f" of {failure.size}" if failure.size else ""
    kinds = list(dict.fromkeys(r.last.type for r in ranks))
    noun = "rank" if len(ranks) == 1 and not failure.size else "ranks"
    return (
        f"{failure.mesh}.{failure.method}() failed on {len(ranks)}{of} {noun} "
        f"({rank_set(r.point for r in ranks)}): {', '.join(kinds)}"
    )


def render(failure: CallFailure, locate: Locate, called_from: list[str] | None = None) -> str:
    """The whole text: the headline, where the call was made, then each group of ranks."""
    out = [headline(failure)]
    if called_from:
        out.extend(called_from)
    for lines, members in _group(failure.ranks, locate).items():
        out.append("")
        names = rank_set(m.point for m in members)
        first = exception_line(members[0].last)
        many = f"ranks {names} ({len(members)})" if len(members) > 1 else f"rank {names}"
        out.append(f"── {many}: {first}")
        out.extend(lines)
    return "\n".join(out) + "\n"


def from_record(record: Mapping) -> RankFailure:
    """A worker's record (plain dicts, see :func:`.worker.record`) as a :class:`RankFailure`."""
    chain = tuple(
        Raised(
            type=str(r["type"]),
            message=str(r["message"]),
            frames=tuple(Frame(*f) for f in r["frames"]),
            relation=str(r.get("relation", "")),
        )
        for r in record["chain"]
    )
    return RankFailure(point=tuple((str(k), int(v)) for k, v in record["point"]), chain=chain)
