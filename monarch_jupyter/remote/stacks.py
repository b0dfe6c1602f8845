"""``%remote stacks``: the hosts' answers (plain data, :mod:`.host.dumps`) as text, identical
stacks folded across ranks in clush's notation (pure: no Monarch, no threads).

Each rank's text is its command's processes, one line each (``pid 123 S hrtimer_nanosleep:
sleep 30``; a Python process's line is followed by its py-spy dump); the run's wrapper shell
is left out while anything else runs. Ranks fold when their texts are equal
once what differs between identical code paths is dropped (:func:`normalise`: pids, thread ids,
thread states, addresses, the rank's own folder); the largest group comes first::

    hosts=[0-6,8] (8):
        pid …: python -u -c …
            Thread … "MainThread"
                wait (<string>:4)
    hosts=7:
        …
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..text.rank_sets import rank_set

Answer = Mapping[str, Any]  # one rank, as the host sent it
INDENT = "    "

_PID = re.compile(r"\bpid \d+")
_THREAD = re.compile(r"^(\s*Thread )(0x[0-9A-Fa-f]+|\d+)( \([^)]*\))?", re.MULTILINE)
_ADDRESS = re.compile(r"\b0x[0-9A-Fa-f]+\b")
RANK_DIR = "$RANK_DIR"


def merge(answers: Iterable[Iterable[Answer]]) -> list[Answer]:
    """Every host's ranks, once each (hosts sharing a machine may send a rank twice), by mesh
    and rank."""
    seen: dict[tuple[str, int], Answer] = {}
    for host in answers:
        for rank in host:
            seen.setdefault((str(rank.get("key")), int(rank.get("rank") or 0)), rank)
    return [seen[k] for k in sorted(seen)]


def process_text(proc: Answer) -> str:
    """One process: its line, then (Python) its stack, indented, or why there is none."""
    if proc.get("python"):
        lines = [f"pid {proc['pid']}" + (f": {proc['cmd']}" if proc.get("cmd") else "")]
    else:
        lines = [f"pid {proc['pid']} {proc['state']} {proc['wchan']}: {proc['cmd']}"]
    if proc.get("stack"):
        lines += [INDENT + line for line in str(proc["stack"]).splitlines()]
    elif proc.get("error"):
        lines.append(f"{INDENT}(no stack: {proc['error']})")
    return "\n".join(lines)


def rank_text(rank: Answer) -> str:
    """A rank's processes, or what became of them."""
    processes = rank.get("processes") or []
    commands = [p for p in processes if not p.get("wrapper")]
    processes = commands or processes  # the wrapper shell only when nothing else runs
    if processes:
        return "\n".join(process_text(p) for p in processes)
    if rank.get("state") == "exited":
        return f"(no process left: exited, rc {rank.get('returncode')})"
    if rank.get("state") == "lost":
        return "(no process left: killed or lost)"
    return "(no process found)"


def normalise(text: str, folder: str | None = None) -> str:
    """``text`` without what differs between ranks running the same code: pids, thread ids and
    states (idle, active, gil: timing), addresses, the rank's folder. A process's state and
    wchan are kept: they are a non-Python process's stack."""
    if folder:
        text = text.replace(folder, RANK_DIR)
    text = _PID.sub("pid …", text)
    text = _THREAD.sub(r"\1…", text)
    return _ADDRESS.sub("0x…", text)


def _label(ranks: list[Answer]) -> str:
    by_mesh: dict[str, list[tuple[tuple[str, int], ...]]] = {}
    for rank in ranks:
        by_mesh.setdefault(str(rank.get("key")), []).append(tuple((rank.get("point") or {}).items()))
    several = len(by_mesh) > 1
    return "; ".join(
        (f"{mesh}/" if several else "") + rank_set(points, brackets=True) for mesh, points in by_mesh.items()
    )


def fold(ranks: list[Answer]) -> list[tuple[list[Answer], str]]:
    """Groups of ranks whose normalised texts are equal, largest first (then by first rank):
    ``(ranks, text)``, the text normalised for a group of several, as the rank sent it for one."""
    groups: dict[str, list[Answer]] = {}
    raw: dict[str, str] = {}
    for rank in ranks:
        text = rank_text(rank)
        key = normalise(text, rank.get("folder"))
        groups.setdefault(key, []).append(rank)
        raw.setdefault(key, text)
    order = sorted(groups, key=lambda k: -len(groups[k]))  # stable: first seen first among equals
    return [(groups[k], k if len(groups[k]) > 1 else raw[k]) for k in order]


def render(run_id: str, command: str, ranks: list[Answer], title: str | None = None) -> str:
    """The verb's text: a header line (``title``, else the run and its command), then each
    group's ranks and its stack."""
    title = title or f"run {run_id} ({command!r})"
    if not ranks:
        return f"{title}: none of its ranks is on the hosts (pruned, or never started)\n"
    groups = fold(ranks)
    n = len(ranks)
    out = [
        f"{title}: {n} rank{'s' if n != 1 else ''}, "
        f"{len(groups)} different stack{'s' if len(groups) != 1 else ''}"
    ]
    for members, text in groups:
        count = f" ({len(members)})" if len(members) > 1 else ""
        out.append(f"{_label(members)}{count}:")
        out += [INDENT + line for line in text.splitlines()]
    return "\n".join(out) + "\n"


# ── the user's actor procs (%remote stacks --actors) ──────────────────────
Locate = Callable[[str, int], "tuple[int, str] | None"]  # (qualname, line) → (cell, source line)

_FRAME = re.compile(r"^(?P<indent>\s+)(?P<func>.+) \((?P<file>[^()]+?):(?P<line>\d+)\)$")
DYNAMIC = "<dynamic-code>"  # cloudpickle's file name for notebook code sent by value
#: files of the threads every Monarch proc has (its event loops, the dispatch loop waiting, our
#: output pumps): a thread with only these frames is idle machinery, not shown
MACHINERY = (
    "monarch/_src/",
    "asyncio/",
    "threading.py",
    "selectors.py",
    "<frozen ",
    "concurrent/",
    "queue.py",
)


def _machinery(line: str) -> bool:
    match = _FRAME.match(line)
    if match is None:
        return True  # a native frame without a line, or py-spy's own remark: neutral
    file = match["file"]
    return file.startswith(MACHINERY) or (file == "<string>" and match["func"] == "_pump")


def threads(stack: str) -> list[list[str]]:
    """A py-spy dump split into threads: each its ``Thread …`` line, then its frames."""
    out: list[list[str]] = []
    for line in stack.splitlines():
        if line.startswith("Thread ") or not out:
            out.append([line])
        else:
            out[-1].append(line)
    return out


def with_cells(stack: str, locate: Locate) -> str:
    """``stack`` with each frame of notebook code named by its cell and followed by its source
    line: ``allreduce (cell [5] line 7)`` then ``    time.sleep(600)``."""
    out: list[str] = []
    for line in stack.splitlines():
        match = _FRAME.match(line)
        found = locate(match["func"], int(match["line"])) if match and match["file"] == DYNAMIC else None
        if match is None or found is None:
            out.append(line)
            continue
        out.append(f"{match['indent']}{match['func']} (cell [{found[0]}] line {match['line']})")
        out.append(f"{match['indent']}{INDENT}{found[1].strip()}")
    return "\n".join(out)


def actor_stack(stack: str, locate: Locate | None = None) -> str:
    """An actor proc's dump without its idle machinery threads (one line counts them), its
    notebook frames named by cell."""
    shown, hidden = [], 0
    for thread in threads(stack):
        if all(_machinery(line) for line in thread[1:]):
            hidden += 1
        else:
            shown.extend(thread)
    text = "\n".join(shown)
    if locate is not None:
        text = with_cells(text, locate)
    if hidden:
        more = f"({hidden} more thread{'s' if hidden != 1 else ''} idle in Monarch's loops)"
        text += f"\n{more}" if text else "(every thread idle in Monarch's loops: no endpoint running there)"
    return text


def actor_answers(answers: Iterable[Iterable[Answer]], locate: Locate | None = None) -> list[Answer]:
    """The hosts' answers for actor procs, merged (:func:`merge`), each dump trimmed and its
    cells named (:func:`actor_stack`)."""
    out: list[Answer] = []
    for rank in merge(answers):
        procs = [
            {**p, "cmd": "", "stack": actor_stack(str(p["stack"]), locate)} if p.get("stack") else p
            for p in rank.get("processes") or []
        ]
        out.append({**rank, "processes": procs})
    return out


def render_actors(ranks: list[Answer], gone: int = 0) -> str:
    """``%remote stacks --actors``' text: a header line, then each group of procs and its stack."""
    meshes = sorted({str(r.get("key")) for r in ranks})
    tail = (
        f"; {gone} proc{'s' if gone != 1 else ''} spawned earlier {'are' if gone != 1 else 'is'} gone"
        if gone
        else ""
    )
    if not ranks:
        return f"no actor proc of this kernel is running{tail}\n"
    groups = fold(ranks)
    n = len(ranks)
    out = [
        f"actors ({', '.join(meshes)}): {n} proc{'s' if n != 1 else ''}, "
        f"{len(groups)} different stack{'s' if len(groups) != 1 else ''}{tail}"
    ]
    for members, text in groups:
        count = f" ({len(members)})" if len(members) > 1 else ""
        out.append(f"{_label(members)}{count}:")
        out += [INDENT + line for line in text.splitlines()]
    return "\n".join(out) + "\n"
