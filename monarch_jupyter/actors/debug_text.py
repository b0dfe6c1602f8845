"""The cell debugger's words (pure): its commands, "stopped at" lines, pdb output shown as cells.

Monarch's pdb runs on the proc, where a notebook-defined class's code has no file
(``<dynamic-code>``): its locations and listings are rewritten here, in the kernel,
from the cells' sources (``locate``: :func:`.cells.find` over the kernel's cells).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .failures import Frame, internal

Locate = Callable[[Frame], "tuple[int, str] | None"]
Source = Callable[[int], "str | None"]  # a cell's source by its number

# pdb's frame lines: "> /path/f.py(12)compute()" (current) and "  /path/f.py(3)<module>()"
_LOCATION = re.compile(r"^(?P<mark>> |  )(?P<file>.+?)\((?P<line>\d+)\)(?P<func>[^()\s]+)\(\)$")
PDB_PROMPT = "(Pdb) "

HELP = """commands (on the attached rank unless said):
  n, s, c, p EXPR, where, list/l, ll, and any other pdb command
  c                continue this rank (the others stay stopped)
  attach RANK      switch to another stopped rank (RANK: its number, or e.g. hosts=1)
  ranks            the ranks waiting at a breakpoint (or after an error: c or q there raises it)
  continue         continue every stopped rank and leave the debugger
  Ctrl-C           leave the debugger: every stopped rank continues, the call raises KeyboardInterrupt
"""


@dataclass(frozen=True)
class Stop:
    """One rank waiting at a breakpoint (the record a proc sends, see :mod:`.worker`)."""

    actor: str  # the actor mesh's name, as Monarch's controller keys sessions
    rank: int
    point: tuple[tuple[str, int], ...]
    frame: Frame
    error: str = ""  # a post-mortem stop: the error the rank raised after a breakpoint ("Type: text")

    @property
    def label(self) -> str:
        return ",".join(f"{name}={value}" for name, value in self.point) or f"rank={self.rank}"


def stop_from(record: dict) -> Stop:
    filename, lineno, name, qualname = record["frame"]
    return Stop(
        actor=str(record["actor"]),
        rank=int(record["rank"]),
        point=tuple((str(n), int(v)) for n, v in record["point"]),
        frame=Frame(str(filename), int(lineno), str(name), str(qualname)),
        error=_one_line(str(record.get("error") or "")),
    )


def _one_line(text: str, width: int = 120) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= width else first[: width - 1] + "…"


def where(frame: Frame, locate: Locate) -> str:
    """``cell [7] line 12 in compute()``, or the file's name and line when not a cell's."""
    found = locate(frame) if frame.filename.startswith("<") else None
    if found is not None:
        return f"cell [{found[0]}] line {frame.lineno} in {frame.name}()"
    return f"{frame.filename} line {frame.lineno} in {frame.name}()"


def stopped_line(stop: Stop, locate: Locate) -> str:
    """``hosts=1 stopped at cell [7] line 12 in compute()``; after an error (post-mortem):
    ``hosts=1 stopped after ValueError: bad at cell [7] line 14 in compute() (post-mortem)``."""
    if stop.error:
        return f"{stop.label} stopped after {stop.error} at {where(stop.frame, locate)} (post-mortem)"
    return f"{stop.label} stopped at {where(stop.frame, locate)}"


@dataclass(frozen=True)
class Command:
    kind: str  # "attach", "continue", "ranks", "help", "list", "longlist", "pdb", "empty"
    arg: str = ""


def parse(line: str) -> Command:
    """A line typed at the cell's debugger prompt."""
    text = line.strip()
    word, _, rest = text.partition(" ")
    rest = rest.strip()
    if not text:
        return Command("empty")
    if word in ("attach", "a") and rest:
        return Command("attach", rest)
    if word == "continue" and not rest:
        return Command("continue")
    if word in ("ranks", "help", "h") and not rest:
        return Command("ranks" if word == "ranks" else "help")
    if word in ("l", "list") and (not rest or span(rest) is not None):
        return Command("list", rest)
    if word in ("ll", "longlist") and not rest:
        return Command("longlist")
    return Command("pdb", text)


def span(arg: str) -> tuple[int, int] | None:
    """``list FIRST[, LAST]``'s lines (pdb's: one number lists 11 lines around it)."""
    parts = [p.strip() for p in arg.split(",")] if arg.strip() else []
    if not parts or len(parts) > 2 or not all(p.isdigit() for p in parts):
        return None
    first = int(parts[0])
    if len(parts) == 1:
        return max(1, first - 5), first + 5
    last = int(parts[1])
    return first, last if last >= first else first + last  # pdb: a smaller LAST is a count


def pick(arg: str, stops: Sequence[Stop]) -> Stop | None:
    """The stopped rank ``attach ARG`` names: a rank number or a label (``hosts=1``)."""
    for stop in stops:
        if arg in (str(stop.rank), stop.label):
            return stop
    return None


def translate(text: str, locate: Locate) -> tuple[str, Frame | None]:
    """pdb's output with notebook frames shown as cell and line (with the source line pdb could
    not show), its trailing prompt dropped; and the current frame it named last, if any."""
    out: list[str] = []
    current: Frame | None = None
    body = text[: -len(PDB_PROMPT)] if text.endswith(PDB_PROMPT) else text
    for line in body.split("\n"):
        match = _LOCATION.match(line)
        if match is None:
            if not (line.startswith("->") and out and out[-1].startswith("-> ") and not line[2:].strip()):
                out.append(line)
            continue
        frame = Frame(match["file"], int(match["line"]), match["func"])
        if match["mark"] == "> ":
            current = frame
        found = locate(frame) if frame.filename.startswith("<") else None
        if found is None:
            out.append(line)
            continue
        # pdb prints no "-> source" line for a file it cannot read: add it
        out += [
            f"{match['mark']}cell [{found[0]}] line {frame.lineno} in {frame.name}()",
            "-> " + found[1].strip(),
        ]
    return "\n".join(out), current


_MACHINERY = ("/threading.py", "/asyncio/", "/concurrent/")


def trim_stack(text: str) -> str:
    """``where``'s stack without the leading frames of Monarch's dispatch and the thread that runs
    it (one line says how many; ``bt`` shows them all)."""
    lines = text.split("\n")
    cut = 0
    for index, line in enumerate(lines):
        match = _LOCATION.match(line)
        if match is None:
            continue
        frame = Frame(match["file"], int(match["line"]), match["func"])
        if not (internal(frame) or any(part in frame.filename for part in _MACHINERY)):
            break
        cut = index + 1
        if cut < len(lines) and lines[cut].startswith("->"):
            cut += 1
    if cut == 0:
        return text
    frames = sum(1 for line in lines[:cut] if _LOCATION.match(line))
    return "\n".join([f"  ({frames} frames of Monarch's dispatch: bt shows them)", *lines[cut:]])


def listing(source: str, current: int, first: int, last: int) -> str:
    """Lines ``first``..``last`` of ``source`` as pdb lists them, ``->`` at ``current``."""
    lines = source.splitlines()
    first, last = max(1, first), min(len(lines), last)
    rows = []
    for number in range(first, last + 1):
        mark = "->" if number == current else "  "
        rows.append(f"{number:4d} {mark}\t{lines[number - 1]}")
    return "\n".join(rows) if rows else "[EOF]"


def cell_listing(
    frame: Frame, locate: Locate, source: Source, whole: bool, lines: tuple[int, int] | None = None
) -> str | None:
    """``list`` (11 lines around, or ``lines``) or ``ll`` (the whole cell) of a notebook frame;
    None when the frame is not a cell's (pdb lists it itself)."""
    found = locate(frame) if frame.filename.startswith("<") else None
    text = source(found[0]) if found else None
    if found is None or text is None:
        return None
    if whole:
        return f"cell [{found[0]}]:\n" + listing(text, frame.lineno, 1, len(text.splitlines()))
    first, last = lines or (frame.lineno - 5, frame.lineno + 5)
    return listing(text, frame.lineno, first, last)
