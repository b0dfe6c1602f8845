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
from collections.abc import Iterable, Mapping
from typing import Any

from ..rank_sets import rank_set

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
        lines = [f"pid {proc['pid']}: {proc['cmd']}"]
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


def render(run_id: str, command: str, ranks: list[Answer]) -> str:
    """The verb's text: a header line, then each group's ranks and its stack."""
    if not ranks:
        return f"run {run_id} ({command!r}): none of its ranks is on the hosts (pruned, or never started)\n"
    groups = fold(ranks)
    n = len(ranks)
    out = [
        f"run {run_id} ({command!r}): {n} rank{'s' if n != 1 else ''}, "
        f"{len(groups)} different stack{'s' if len(groups) != 1 else ''}"
    ]
    for members, text in groups:
        count = f" ({len(members)})" if len(members) > 1 else ""
        out.append(f"{_label(members)}{count}:")
        out += [INDENT + line for line in text.splitlines()]
    return "\n".join(out) + "\n"
