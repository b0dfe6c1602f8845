"""The job's live topology (hosts → procs → actors) from plain rows (pure).

A row is a plain dict, one per node, as :mod:`.admin` makes them from Monarch's mesh admin
(``/v1/{ref}``)::

    {"kind": "host" | "proc" | "actor", "id": ref, "parent": ref | None, "name": str,
     "status": str, "messages": int, "queue": int, "rss": int | None, "system": bool,
     "busy_s": float | None, "busy_in": str}   # an actor's oldest running handler: seconds, name

:func:`build` turns rows into a :class:`Topology`; given the previous sample it flags a
*stuck* actor: messages waiting (queue > 0) and none processed since the previous sample
while the queue did not shrink, or one handler running for ``stuck_after`` seconds (a Python
actor takes its messages off Monarch's queue at once: its backlog is behind that handler,
not in ``queue``). :func:`to_data` is the widget's plain state, :func:`text` the tree for
terminals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

STUCK_AFTER = 30.0  # seconds one handler may run before its actor is "stuck"
MAX_ACTORS_SHOWN = 50  # per proc, in the text tree


@dataclass(frozen=True)
class Actor:
    id: str
    name: str
    status: str
    messages: int
    queue: int
    system: bool = False
    busy_s: float | None = None
    busy_in: str = ""
    stuck: bool = False


@dataclass
class Proc:
    id: str
    name: str
    rss: int | None = None
    queue: int = 0
    actors: list[Actor] = field(default_factory=list)

    @property
    def stuck(self) -> int:
        return sum(actor.stuck for actor in self.actors)


@dataclass
class Host:
    id: str
    name: str
    rss: int | None = None
    procs: list[Proc] = field(default_factory=list)


@dataclass
class Topology:
    """One sample of the job's topology; ``sampled`` is when (epoch seconds), ``elapsed`` its cost."""

    hosts: list[Host] = field(default_factory=list)
    sampled: float = 0.0
    elapsed: float = 0.0
    error: str = ""
    missing: int = 0  # nodes that did not answer this sample

    def actors(self) -> Iterable[Actor]:
        for host in self.hosts:
            for proc in host.procs:
                yield from proc.actors

    @property
    def stuck(self) -> list[Actor]:
        return [actor for actor in self.actors() if actor.stuck]

    def counters(self) -> dict[str, tuple[int, int]]:
        """Actor id → (messages processed, queue depth): what the next sample is judged against."""
        return {actor.id: (actor.messages, actor.queue) for actor in self.actors()}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def is_stuck(
    messages: int, queue: int, busy_s: float | None, before: tuple[int, int] | None, stuck_after: float
) -> bool:
    """One handler busy for ``stuck_after`` seconds, or messages waiting and nothing processed
    since ``before`` while the queue did not shrink."""
    if busy_s is not None and busy_s >= stuck_after:
        return True
    if queue <= 0 or before is None:
        return False
    return messages <= before[0] and queue >= before[1]


def _actor(row: Mapping[str, Any], before: Mapping[str, tuple[int, int]], stuck_after: float) -> Actor:
    messages, queue = _int(row.get("messages")), _int(row.get("queue"))
    busy = row.get("busy_s")
    busy_s = float(busy) if isinstance(busy, (int, float)) and not isinstance(busy, bool) else None
    ident = str(row.get("id", ""))
    return Actor(
        id=ident,
        name=str(row.get("name") or ident),
        status=str(row.get("status") or "?"),
        messages=messages,
        queue=queue,
        system=bool(row.get("system")),
        busy_s=busy_s,
        busy_in=str(row.get("busy_in") or ""),
        stuck=is_stuck(messages, queue, busy_s, before.get(ident), stuck_after),
    )


def _rss(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def build(
    rows: Iterable[Mapping[str, Any]],
    previous: Topology | None = None,
    sampled: float = 0.0,
    stuck_after: float = STUCK_AFTER,
) -> Topology:
    """The tree of ``rows`` in their order; nodes whose parent is missing are dropped."""
    before = previous.counters() if previous is not None else {}
    hosts: dict[str, Host] = {}
    procs: dict[str, Proc] = {}
    pending: list[Mapping[str, Any]] = []
    missing = 0
    for row in rows:
        kind, ident = row.get("kind"), str(row.get("id", ""))
        if kind == "host":
            hosts[ident] = Host(ident, str(row.get("name") or ident), _rss(row.get("rss")))
        elif kind in ("proc", "actor"):
            pending.append(row)
        elif kind == "missing":
            missing += 1
    for row in pending:
        if row.get("kind") != "proc":
            continue
        host = hosts.get(str(row.get("parent")))
        if host is not None:
            ident = str(row.get("id", ""))
            proc = Proc(ident, str(row.get("name") or ident), _rss(row.get("rss")), _int(row.get("queue")))
            procs[ident] = proc
            host.procs.append(proc)
    for row in pending:
        proc_of = procs.get(str(row.get("parent"))) if row.get("kind") == "actor" else None
        if proc_of is not None:
            proc_of.actors.append(_actor(row, before, stuck_after))
    return Topology(list(hosts.values()), sampled=sampled, missing=missing)


def memory(value: int | None) -> str:
    """Bytes as a short size (``117 MB``); ``-`` when unknown."""
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit in ("B", "KB", "MB") else f"{size:.1f} {unit}"
        size /= 1000
    return "-"  # pragma: no cover


def summary(topology: Topology) -> str:
    """``2 hosts · 6 procs · 14 actors · 1 stuck`` (or the sample's error)."""
    if topology.error:
        return topology.error
    procs = sum(len(host.procs) for host in topology.hosts)
    actors = sum(1 for _ in topology.actors())
    stuck = len(topology.stuck)
    parts = [_count(len(topology.hosts), "host"), _count(procs, "proc"), _count(actors, "actor")]
    if stuck:
        parts.append(f"{stuck} stuck")
    if topology.missing:
        parts.append(f"{_count(topology.missing, 'node')} did not answer")
    return " · ".join(parts)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def actor_label(actor: Actor) -> str:
    """One actor as a line: name, status, processed, queue (and STUCK)."""
    line = f"{actor.name}  {actor.status}  processed {actor.messages}  queue {actor.queue}"
    if actor.busy_s is not None and actor.busy_s >= 1:
        line += f"  busy {actor.busy_s:.0f} s" + (f" in {actor.busy_in}" if actor.busy_in else "")
    return line + ("  ← STUCK" if actor.stuck else "")


def text(topology: Topology) -> str:
    """The tree as text (terminals, ``%job topology``)."""
    lines = [summary(topology)]
    for h, host in enumerate(topology.hosts):
        last_host = h == len(topology.hosts) - 1
        lines.append(f"{'└─' if last_host else '├─'} host {host.name}  mem {memory(host.rss)}")
        pad = "   " if last_host else "│  "
        for p, proc in enumerate(host.procs):
            last_proc = p == len(host.procs) - 1
            lines.append(
                f"{pad}{'└─' if last_proc else '├─'} proc {proc.name}  mem {memory(proc.rss)}  queue {proc.queue}"
            )
            inner = pad + ("   " if last_proc else "│  ")
            shown = proc.actors[:MAX_ACTORS_SHOWN]
            for a, actor in enumerate(shown):
                branch = "└─" if a == len(shown) - 1 and len(shown) == len(proc.actors) else "├─"
                lines.append(f"{inner}{branch} {actor_label(actor)}")
            if len(proc.actors) > len(shown):
                lines.append(f"{inner}└─ … {len(proc.actors) - len(shown)} more actors")
    return "\n".join(lines)


def to_data(topology: Topology) -> dict[str, Any]:
    """The widget's plain state: JSON-able, stuck actors first within each proc."""
    return {
        "summary": summary(topology),
        "error": topology.error,
        "sampled": topology.sampled,
        "elapsed_ms": round(topology.elapsed * 1000, 1),
        "stuck": len(topology.stuck),
        "hosts": [
            {
                "id": host.id,
                "name": host.name,
                "mem": memory(host.rss),
                "procs": [
                    {
                        "id": proc.id,
                        "name": proc.name,
                        "mem": memory(proc.rss),
                        "queue": proc.queue,
                        "stuck": proc.stuck,
                        "actors": [
                            {
                                "id": actor.id,
                                "name": actor.name,
                                "status": actor.status,
                                "messages": actor.messages,
                                "queue": actor.queue,
                                "system": actor.system,
                                "stuck": actor.stuck,
                                "busy": ""
                                if actor.busy_s is None or actor.busy_s < 1
                                else f"{actor.busy_s:.0f} s"
                                + (f" in {actor.busy_in}" if actor.busy_in else ""),
                            }
                            for actor in sorted(proc.actors, key=lambda actor: not actor.stuck)
                        ],
                    }
                    for proc in host.procs
                ],
            }
            for host in topology.hosts
        ],
    }
