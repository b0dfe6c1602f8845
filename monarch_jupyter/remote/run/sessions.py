"""The kernel side of ``%%remote python --session``: which sessions a context's job has, and
values to and from each rank's namespace.

A session is a name and a shape (its mesh, ``--per-host``, ``--torch``): its namespaces live on
the hosts (:mod:`.host.session`), one per rank, and are found there by name, so any kernel of
the folder reaches them, before or after a restart. The book (``.monarch/<context>/sessions.json``,
plain JSON) records each session's shape and the job it belongs to, so a cell with only
``--session NAME`` runs in the same ranks, ``%load_ext`` can say which sessions there are without
asking the hosts, and an ended job's sessions are forgotten.

No IPython here: the magics and verbs call :class:`Sessions`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...system import files as _files
from ...text.rank_sets import rank_set
from ..errors import SessionError
from ..view.args import RemoteArgs
from ..view.model import RankState
from ..view.quiet import ranks_label
from ..view.session_text import Point, group_errors
from ..wire.protocol import OUT
from .index import job_key, where

if TYPE_CHECKING:
    from ...jobs.facade import JobContext
    from .drive import Plan
    from .runner import RemoteRunner

BOOK = "sessions.json"  # in .monarch/<context>/ (verbs.sessions.BOOK names it too)
BOOK_MAX = 1 << 20
PULL_MAX = 256_000_000  # bytes a pull takes per rank unless --max-bytes says otherwise
PUSH_MAX = 64_000_000  # bytes a push sends per rank unless --max-bytes says otherwise
CALL_TIMEOUT = 600.0  # seconds a pull or push may take (a big value over a slow network)
UNBLOCK_WAIT = 15.0  # seconds freed ranks get to end their blocked cell
REGROUP_TIMEOUT = 60.0  # seconds the ranks get to meet in the new process group


@dataclass(frozen=True)
class SessionShape:
    """Where a session's namespaces are: what its first cell targeted."""

    name: str
    mesh: str | None
    per_host: tuple[tuple[str, int], ...] | None
    torch: bool
    started: float
    target: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "per_host": [list(p) for p in self.per_host or ()]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionShape:
        per_host = tuple((str(d), int(n)) for d, n in data.get("per_host") or ()) or None
        return cls(
            name=str(data["name"]),
            mesh=data.get("mesh"),
            per_host=per_host,
            torch=bool(data.get("torch")),
            started=float(data.get("started") or 0.0),
            target=str(data.get("target") or ""),
        )


class Book:
    """``.monarch/<context>/sessions.json``: the job's key and each session's shape."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> tuple[str | None, dict[str, SessionShape]]:
        try:
            raw = _files.read_small(self.path, BOOK_MAX)
            data = json.loads(raw) if raw else {}
            shapes = {name: SessionShape.from_json(s) for name, s in dict(data.get("sessions") or {}).items()}
            return data.get("job"), shapes
        except (OSError, ValueError, TypeError, KeyError):  # unreadable: no sessions known
            return None, {}

    def shapes(self, job: str) -> dict[str, SessionShape]:
        """The sessions of job ``job`` (those of an earlier job are not)."""
        recorded, shapes = self.read()
        return shapes if recorded == job else {}

    def write(self, job: str, shapes: dict[str, SessionShape]) -> None:
        data = {"job": job, "sessions": {n: s.to_json() for n, s in shapes.items()}}
        _files.private_dir(self.path.parent)
        _files.write_atomic(self.path, json.dumps(data, indent=1).encode())


class Sessions:
    """A context's sessions, through the session's runner (its warm actors)."""

    def __init__(self, session: JobContext, runner: RemoteRunner) -> None:
        self.session = session
        self.runner = runner

    # ── the book ──────────────────────────────────────────────────────
    def book(self) -> Book:
        return Book(where(self.session).runs_dir.parent / BOOK)

    def job(self) -> str:
        """The running job's key (raises when no healthy job runs)."""
        apply_id, here = self.runner.job_identity()
        return job_key(apply_id, here.root, here.context)

    def shapes(self) -> dict[str, SessionShape]:
        return self.book().shapes(self.job())

    def shape(self, name: str) -> SessionShape:
        found = self.shapes().get(name)
        if found is None:
            known = ", ".join(self.shapes()) or "none"
            raise SessionError(
                f"no session {name!r} in this context's job (sessions: {known}): "
                f"%%remote python --session {name} starts it"
            )
        return found

    def forget(self, name: str | None) -> None:
        """Drop ``name`` (all: None) from the book."""
        job = self.job()
        shapes = self.book().shapes(job)
        self.book().write(job, {} if name is None else {n: s for n, s in shapes.items() if n != name})

    # ── a cell ────────────────────────────────────────────────────────
    def prepare(self, args: RemoteArgs) -> RemoteArgs:
        """A session cell's arguments in the session's shape (recorded by its first cell): a
        cell that names another mesh or ``--per-host`` is refused; ``--torch`` is set once."""
        assert args.session is not None
        name = args.session
        job = self.job()
        shapes = self.book().shapes(job)
        known = shapes.get(name)
        if known is None:
            shape = SessionShape(name, args.mesh, args.per_host, args.torch, time.time())
            self.book().write(job, {**shapes, name: shape})
            return args
        for flag, given, kept in (
            ("--mesh", args.mesh, known.mesh),
            ("--per-host", args.per_host, known.per_host),
        ):
            if given is not None and given != kept:
                raise SessionError(
                    f"session {name} runs on {_shape_text(known)}: a cell of it cannot change {flag} "
                    f"(%remote session stop {name}, then start it anew with the new one)"
                )
        if args.torch and not known.torch:
            raise SessionError(
                f"session {name} was started without --torch: its ranks' variables are set when it "
                f"starts (%remote session restart {name} --torch)"
            )
        # --torch's variables were set when the namespaces started: not asked of the hosts again
        return dataclasses.replace(args, mesh=known.mesh, per_host=known.per_host, torch=False)

    def record_target(self, name: str, target: str) -> None:
        job = self.job()
        shapes = self.book().shapes(job)
        if name in shapes and shapes[name].target != target:
            shapes[name] = dataclasses.replace(shapes[name], target=target)
            self.book().write(job, shapes)

    # ── the hosts ─────────────────────────────────────────────────────
    def rows(self, name: str | None = None) -> list[dict[str, Any]]:
        """Every rank's namespace of the job on its host (``name``'s, or all)."""
        job = self.job()
        return [row for answer in self.runner.call_all("session_list", job, name) for row in answer]

    def stop(self, name: str | None) -> int:
        """End the namespaces (``name``'s, or all) on every host: how many lived."""
        ended = sum(self.runner.call_all("session_stop", self.job(), name, timeout=60.0))
        self.forget(name)
        return int(ended)

    def stacks(self, name: str | None, native: bool) -> list[Any]:
        return [
            a for answer in self.runner.call_all("session_stacks", self.job(), name, native) for a in answer
        ]

    def plan(self, name: str, ranks: tuple[int, ...] | None) -> Plan:
        shape = self.shape(name)
        args = RemoteArgs(command="", mode="python", mesh=shape.mesh, per_host=shape.per_host, ranks=ranks)
        return self.runner.plan(args)

    def pull(
        self, name: str, expr: str, ranks: tuple[int, ...] | None, max_bytes: int
    ) -> list[tuple[RankState, Any]]:
        """``expr`` evaluated on each chosen rank: ``[(rank, value)]`` in rank order."""
        import pickle

        plan = self.plan(name, ranks)
        answers = self._call(plan, "session_eval", name, lambda _: (expr, max_bytes))
        failed = {_point(plan.ranks[i]): error for i, (_, _, error) in answers.items() if error}
        if failed:
            raise SessionError(group_errors(failed))
        return [(plan.ranks[i], pickle.loads(data)) for i, (_, data, _) in answers.items()]

    def push(self, plan: Plan, name: str, items: list[dict[str, bytes]] | dict[str, bytes]) -> int:
        """Set pickled values in each rank of ``plan``'s namespace: the same ``items`` for all, or
        one dict per rank (``--scatter``, in plan order). How many ranks took them."""
        per_rank = items if isinstance(items, list) else None
        answers = self._call(
            plan, "session_push", name, lambda index: (per_rank[index] if per_rank is not None else items,)
        )
        failed = {_point(plan.ranks[i]): error for i, (_, _, error) in answers.items() if error}
        if failed:
            raise SessionError(group_errors(failed))
        return len(answers)

    def unblock(self, name: str) -> str:
        """Free the session's ranks blocked in C++ (a collective whose peer failed or was
        interrupted: SIGINT waits there) by closing their TCP connections, wait for their cell
        to end, then, for a ``--torch`` session, make the default process group anew on a
        fresh store and wrap each DDP model again: every variable kept. One line, what it did."""
        shape = self.shape(name)
        plan = self.plan(name, None)
        where = {i: a for i, (_, a, _) in self._control(plan, name, {"op": "where"}).items() if a}
        busy = sorted(i for i, a in where.items() if a.get("busy"))
        said = []
        if busy:
            self._control(plan, name, {"op": "unblock"})
            still = self._wait_idle(plan, name, UNBLOCK_WAIT)
            if still:
                places = sorted({str(where[i].get("where") or "?") for i in still})
                raise SessionError(
                    f"{ranks_label(plan.ranks[i] for i in still)} still run their cell after their "
                    f"connections were closed (in {', '.join(places)}): Ctrl-C stops a cell in Python; "
                    f"%remote session restart {name} starts them anew, losing their variables"
                )
            places = sorted({str(where[i].get("where") or "?") for i in busy})
            said.append(f"freed {ranks_label(plan.ranks[i] for i in busy)} (blocked in {', '.join(places)})")
        else:
            said.append("no rank was blocked")
        if shape.torch:
            said.append(self._regroup(plan, name))
        return f"session {name}: " + "; ".join(said) + "; every variable kept\n"

    def _control(
        self, plan: Plan, name: str, request: dict[str, Any]
    ) -> dict[int, tuple[int, Any, str | None]]:
        return self._call(plan, "session_control", name, lambda _: (request,))

    def _wait_idle(self, plan: Plan, name: str, limit: float) -> list[int]:
        """Ping until no rank runs a cell (at most ``limit`` s): the ranks still busy."""
        deadline = time.monotonic() + limit
        while True:
            answers = self._control(plan, name, {"op": "ping"})
            still = sorted(i for i, (_, a, _) in answers.items() if a and a.get("busy"))
            if not still or time.monotonic() > deadline:
                return still
            time.sleep(0.2)

    def _regroup(self, plan: Plan, name: str) -> str:
        """Every rank makes the default process group anew at once (a collective)."""
        from .distributed import master_env

        env = master_env(self.session.loop, plan.targets[0].actors, 30.0)
        addr, port = env["MASTER_ADDR"], int(env["MASTER_PORT"])
        request = {"op": "regroup", "addr": addr, "port": port, "timeout": REGROUP_TIMEOUT}
        answers = self._control(plan, name, request)
        failed = {_point(plan.ranks[i]): error for i, (_, _, error) in answers.items() if error}
        if failed:
            raise SessionError(f"the process group was not made anew: {group_errors(failed)}")
        first = next(a for _, a, _ in answers.values())
        wrapped = sorted({n for _, a, _ in answers.values() for n in a.get("rewrapped") or ()})
        text = f"process group made anew ({first.get('backend')}, {first.get('world')} ranks, {addr}:{port})"
        if wrapped:
            text += f", DDP wrapped again on it: {', '.join(wrapped)} (rank 0's weights on every rank)"
        return text

    def debug(self, name: str, rank: RankState, line: str) -> None:
        """A line for the pdb of a ``breakpoint()`` in ``rank``'s running cell."""
        plan = self.plan(name, (rank.rank,))
        self._call(plan, "session_debug", name, lambda _: (line,))

    def _call(
        self, plan: Plan, endpoint: str, name: str, args_for: Callable[[int], tuple[Any, ...]]
    ) -> dict[int, tuple[int, Any, str | None]]:
        """``endpoint(job, name, mesh, *args_for(plan index))`` on each rank of ``plan``:
        ``{plan index: answer}`` in rank order. Ranks asked the same go in one call per mesh."""
        job = self.job()
        same = all(args_for(i) is args_for(0) or args_for(i) == args_for(0) for i in range(len(plan.ranks)))

        async def each_rank() -> dict[int, tuple[int, Any, str | None]]:
            found: dict[int, tuple[int, Any, str | None]] = {}
            for target in plan.targets:
                for index in target.indices.values():
                    several = len(target.indices) > 1  # else the target is that one rank already
                    one = target.actors.slice(**plan.ranks[index].point) if several else target.actors
                    found[index] = await getattr(one, endpoint).call_one(
                        job, name, target.mesh, *args_for(index)
                    )
            return found

        async def each_mesh() -> dict[int, tuple[int, Any, str | None]]:
            # every mesh asked at once: a request may be a collective across them (regroup)
            meshes = await asyncio.gather(
                *(getattr(t.actors, endpoint).call(job, name, t.mesh, *args_for(0)) for t in plan.targets)
            )
            found: dict[int, tuple[int, Any, str | None]] = {}
            for target, values in zip(plan.targets, meshes, strict=True):
                for answer in values.values():
                    if int(answer[0]) in target.indices:
                        found[target.indices[int(answer[0])]] = answer
            return found

        ask = each_mesh if same else each_rank
        found = self.session.loop.run(ask(), timeout=CALL_TIMEOUT)
        return {i: found[i] for i in sorted(found)}


def _shape_text(shape: SessionShape) -> str:
    text = f"mesh {shape.mesh}" if shape.mesh else "the job's first mesh"
    if shape.per_host:
        text += " per host " + ",".join(f"{d}={n}" for d, n in shape.per_host)
    return text


PROMPT = "(Pdb) "  # as host.session_server.PROMPT: a rank waits at breakpoint()


class DebugRelay:
    """``breakpoint()`` in a session cell, debugged from the waiting cell: when a running rank's
    output ends in pdb's prompt (and grew since the last line sent), ``ask`` the user for a
    line and send it to that rank's pdb. Without input (a front end that has none, e.g.
    nbconvert), ``continue`` is sent and ``say`` tells so."""

    def __init__(
        self, sessions: Sessions, name: str, ask: Callable[[str], str], say: Callable[[str], None]
    ) -> None:
        self.sessions = sessions
        self.name = name
        self.ask = ask
        self.say = say
        self.sent: dict[int, int] = {}  # rank index → its output's size when a line was last sent

    def __call__(self, state: Any, flush: Callable[[], None]) -> None:
        for index, rank in enumerate(state.ranks):
            if rank.done or not rank.pending[OUT].endswith(PROMPT) or self.sent.get(index) == rank.nbytes:
                continue
            self.sent[index] = rank.nbytes
            flush()  # pdb's lines above the prompt
            try:
                line = self.ask(f"[{rank.label}] (Pdb) ")
            except Exception:  # no stdin here (StdinNotImplementedError): do not leave it waiting
                line = "continue"
                self.say(f"breakpoint() on {rank.label}: this front end takes no input, so it continues\n")
            self.sessions.debug(self.name, rank, line)


# ── text (pure; the rest is in view/session_text.py) ──────────────────


def _point(rank: RankState) -> Point:
    return tuple(rank.point.items())


def rows_text(rows: list[dict[str, Any]], shapes: dict[str, SessionShape]) -> str:
    """``%remote session ls``: one line per session, its ranks' state from the hosts."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_name.setdefault(str(row.get("name")), []).append(row)
    names = list(shapes) + [n for n in by_name if n not in shapes]
    if not names:
        return "no session in this context's job: %%remote python --session [NAME] starts one\n"
    lines = [f"{'session':<16} {'live':>9} {'busy':>5} {'cells':>6}  where"]
    for name in names:
        members = by_name.get(name, [])
        live = [r for r in members if r.get("alive")]
        busy = sum(1 for r in live if r.get("busy"))
        cells = max((int(r.get("cells") or 0) for r in live), default=0)
        shape = shapes.get(name)
        where_ = shape.target or _shape_text(shape) if shape else "(not in this kernel's book)"
        line = f"{name:<16} {len(live):>4} of {len(members):<2} {busy:>5} {cells:>6}  {where_}"
        fresh = [tuple(dict(r.get("point") or {}).items()) for r in live if r.get("restarted")]
        if fresh:  # never a silent mix of old and new namespaces
            line += f"  · started anew, variables lost: {rank_set(fresh, brackets=True)}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def scatter_items(name: str, value: Any, count: int) -> list[Any]:
    """``--scatter``: rank i gets ``value[i]``; the value must have one item per rank."""
    try:
        size = len(value)
    except TypeError:
        raise SessionError(
            f"--scatter {name}: the value has no length; give one item per rank ({count})"
        ) from None
    if size != count:
        raise SessionError(f"--scatter {name}: {size} items for {count} ranks; give one item per rank")
    return [value[i] for i in range(count)]
