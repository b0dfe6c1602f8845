"""``%remote session start|ls|stop|restart|attach|unblock [NAME]``, ``%remote pull`` and ``%remote push``:
the namespaces a ``%%remote python --session`` cell runs in, and values to and from them."""

from __future__ import annotations

import argparse
import re
from typing import Any

from ....text.parser import ArgumentsError
from ...view.args import DEFAULT_SESSION, RemoteArgs, _per_host, flat_ranks
from .registry import Cell, arg, verb

ACTIONS = ("start", "ls", "stop", "restart", "attach", "unblock")
BOOK = "sessions.json"  # as ..sessions.BOOK, named here so %load_ext's note imports nothing
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmg]?i?b?)?", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "kib": 1024, "m": 1e6, "mb": 1e6, "mib": 1 << 20}
_UNITS.update({"g": 1e9, "gb": 1e9, "gib": 1 << 30})


def _bytes(text: str) -> int:
    """``64MB``, ``1.5GiB``, ``1000``: a size in bytes."""
    match = _SIZE.fullmatch(text.strip())
    unit = (match.group(2) or "").lower() if match else None
    if match is None or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"wants a size such as 64MB or 1GiB, got {text!r}")
    return int(float(match.group(1)) * _UNITS[unit])


_NAME = arg("name", nargs="?", metavar="NAME", help=f"the session (default {DEFAULT_SESSION})")
_SESSION = arg(
    "--session", default=DEFAULT_SESSION, metavar="NAME", help=f"the session (default {DEFAULT_SESSION})"
)
_RANKS = arg("--rank", dest="ranks", type=flat_ranks, metavar="N[,M…]", help="only these flat ranks")


@verb(
    "session",
    "start | ls | stop | restart | attach | unblock a session (its namespaces, one per rank)",
    arg(
        "action",
        choices=ACTIONS,
        metavar="ACTION",
        help="start, ls, stop, restart, attach, or unblock (free ranks blocked in a collective, keep every variable)",
    ),
    _NAME,
    arg("--torch", action="store_true", help="start: set torch.distributed's rank variables"),
    arg(
        "--check-collectives",
        action="store_true",
        help="start: TORCH_DISTRIBUTED_DEBUG=DETAIL, so ranks calling different collectives or shapes raise at once",
    ),
    arg("--per-host", type=_per_host, metavar="DIM=N", help="start: N namespaces per host"),
    arg("--mesh", metavar="NAME", help="start: on this mesh (default the job's first)"),
    arg("--all", dest="every", action="store_true", help="stop: every session of the job"),
)
def session(
    cell: Cell,
    action: str,
    name: str | None,
    torch: bool,
    per_host: tuple[tuple[str, int], ...] | None,
    mesh: str | None,
    every: bool,
    check_collectives: bool = False,
) -> None:
    from ...run import sessions as session_text

    if every and (action != "stop" or name):
        raise ArgumentsError("%remote session: --all goes with stop, without a NAME")
    chosen = name or DEFAULT_SESSION
    if action == "ls":
        cell.write(session_text.rows_text(cell.sessions.rows(name), cell.sessions.shapes()))
    elif action == "stop":
        ended = cell.sessions.stop(None if every else chosen)
        what = "every session" if every else f"session {chosen}"
        cell.write(f"{what}: {ended} namespace{'s' if ended != 1 else ''} ended\n")
    elif action == "attach":
        cell.write(_attach_line(cell, chosen))
    elif action == "unblock":
        cell.write(cell.sessions.unblock(chosen))
    else:
        start = RemoteArgs(
            command="pass",
            mode="python",
            session=chosen,
            mesh=mesh,
            per_host=per_host,
            torch=torch,
            # read by torch when it is imported: set in the namespace before any cell imports it
            env=(("TORCH_DISTRIBUTED_DEBUG", "DETAIL"),) if check_collectives else (),
        )
        if action == "restart":
            start = _restarted(cell, start)
        cell.run_args(start)


def _restarted(cell: Cell, start: RemoteArgs) -> RemoteArgs:
    """The namespaces ended and started anew in the session's shape (flags given win)."""
    import dataclasses

    assert start.session is not None
    shape = cell.sessions.shapes().get(start.session)
    ended = cell.sessions.stop(start.session)
    cell.write(
        f"session {start.session}: {ended} namespace{'s' if ended != 1 else ''} ended, starting anew\n"
    )
    if shape is None:
        return start
    return dataclasses.replace(
        start,
        mesh=start.mesh or shape.mesh,
        per_host=start.per_host or shape.per_host,
        torch=start.torch or shape.torch,
    )


def _attach_line(cell: Cell, name: str) -> str:
    rows = [r for r in cell.sessions.rows(name) if r.get("alive")]
    if not rows:
        cell.sessions.forget(name)
        return (
            f"session {name} has no live namespace (stopped, or ended with its job): "
            f"%remote session start {name} starts it anew\n"
        )
    cells = max(int(r.get("cells") or 0) for r in rows)
    busy = sum(1 for r in rows if r.get("busy"))
    line = (
        f"session {name}: {len(rows)} namespace{'s' if len(rows) != 1 else ''} live, as they were "
        f"({cells} cells run){f', {busy} busy running a cell' if busy else ''}: "
        f"%%remote python --session {name} runs in them\n"
    )
    return line


@verb(
    "pull",
    "EXPR (after the flags, as typed) in each rank's namespace: its values",
    arg("expr", nargs="?", metavar="EXPR", help="a Python expression: the rest of the line"),
    _SESSION,
    _RANKS,
    arg("--max-bytes", type=_bytes, default=None, metavar="SIZE", help="per rank, pickled (default 256MB)"),
    verbatim="expr",
)
def pull(cell: Cell, expr: str, session: str, ranks: tuple[int, ...] | None, max_bytes: int | None) -> Any:
    from ...run.sessions import PULL_MAX
    from ...view.results import RankValues

    text = expr
    found = cell.sessions.pull(session, text, ranks, max_bytes or PULL_MAX)
    return RankValues([(rank.label, value) for rank, value in found], text, [rank.point for rank, _ in found])


@verb(
    "push",
    "notebook values into each rank's namespace of a session",
    arg(
        "items",
        nargs="+",
        metavar="NAME[=EXPR]",
        help="NAME gets EXPR's value (default: the notebook's NAME)",
    ),
    _SESSION,
    _RANKS,
    arg("--scatter", action="store_true", help="rank i gets item i of each value (one item per rank)"),
    arg("--broadcast", action="store_true", help="every rank gets the whole value (the default)"),
    arg("--max-bytes", type=_bytes, default=None, metavar="SIZE", help="per rank, pickled (default 64MB)"),
)
def push(
    cell: Cell,
    items: list[str],
    session: str,
    ranks: tuple[int, ...] | None,
    scatter: bool,
    broadcast: bool,
    max_bytes: int | None,
) -> None:
    import time

    import cloudpickle

    from ...run.sessions import PUSH_MAX, scatter_items
    from ...view.session_text import size_line

    if scatter and broadcast:
        raise ArgumentsError("%remote push: --scatter or --broadcast, not both")
    limit = max_bytes or PUSH_MAX
    values = _values(cell, items)
    plan = cell.sessions.plan(session, ranks)
    count = len(plan.ranks)
    started = time.monotonic()
    if scatter:
        columns = {name: scatter_items(name, value, count) for name, value in values.items()}
        per_rank = [
            {name: cloudpickle.dumps(column[i]) for name, column in columns.items()} for i in range(count)
        ]
        sizes = {name: max(len(r[name]) for r in per_rank) for name in values}
        payload: list[dict[str, bytes]] | dict[str, bytes] = per_rank
    else:
        pickled = {name: cloudpickle.dumps(value) for name, value in values.items()}
        sizes = {name: len(data) for name, data in pickled.items()}
        payload = pickled
    if sum(sizes.values()) > limit:
        biggest = max(sizes, key=lambda n: sizes[n])
        raise ArgumentsError("%remote push: " + size_line(biggest, sum(sizes.values()), limit))
    took = cell.sessions.push(plan, session, payload)
    total = sum(sizes.values())
    cell.write(
        f"pushed {', '.join(values)} to {took} rank{'s' if took != 1 else ''} of session {session} "
        f"({total / 1e6:.1f} MB pickled{' per rank' if not scatter else ', split'}, "
        f"{time.monotonic() - started:.2f} s)\n"
    )


def _values(cell: Cell, items: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in items:
        name, _, expr = item.partition("=")
        name = name.strip()
        if not name.isidentifier():
            raise ArgumentsError(f"%remote push: {item!r} is not NAME or NAME=EXPR")
        try:
            values[name] = eval(expr or name, cell.user_ns)
        except Exception as error:
            raise ArgumentsError(f"%remote push {name}: {type(error).__name__}: {error}") from None
    return values


# ── for the composition root: %load_ext's note and %job kill ──────────
def sessions_note(session: Any) -> str | None:
    """What ``%load_ext`` / ``%job`` say about the sessions this context's book records (plain
    files: no Monarch, no hosts asked)."""
    try:
        path = session.layout.dir / session.context / BOOK
        if not path.is_file():  # the common case: nothing imported, one stat
            return None
        from ...run.sessions import Book

        _, shapes = Book(path).read()
    except Exception:
        return None
    if not shapes:
        return None
    names = ", ".join(shapes)
    first = next(iter(shapes))
    return (
        f"monarch_jupyter: session{'s' if len(shapes) != 1 else ''} {names} of this context's job "
        f"may still hold their namespaces: %remote session attach {first} reconnects, "
        "%remote session ls shows which ranks live"
    )


def stop_for_kill(session: Any, runner: Any) -> str | None:
    """Before ``%job kill``: end the job's session namespaces; a line saying so."""
    from ...run.sessions import Sessions

    if sessions_note(session) is None:  # no book: nothing to end, and no job to attach to for it
        return None
    sessions = Sessions(session, runner)
    try:
        if not sessions.shapes():
            return None
        ended = sessions.stop(None)
    except Exception:  # the job is gone already: its namespaces end with their workers
        return None
    return f"ended {ended} session namespace{'s' if ended != 1 else ''} first" if ended else None
