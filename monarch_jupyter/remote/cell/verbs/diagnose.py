"""The verbs that look into runs and procs: ``stacks`` shows what a run's processes (or the
user's actor procs) are doing, identical stacks folded (:mod:`...view.stacks`); ``grep`` a run's
matching lines by rank (:mod:`...run.grep`); ``debug`` the ranks stopped at a breakpoint; ``shell`` a
terminal with a shell on one rank (:mod:`...rank_shell`). Also the grid's Stacks button and
resources."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....errors import MonarchJupyterError
from ....text.parser import ArgumentsError
from ...errors import RunsError
from ...view.args import dims, flat_ranks
from ...wire.protocol import ERR, OUT, GrepQuery
from .registry import Cell, arg, verb
from .runs import USAGE_INTERVAL, first_line, run_entries, running_entries

if TYPE_CHECKING:  # imported where used: these verbs are declared at %load_ext
    from ....jobs.facade import JobContext
    from ...run import grep as grep_text
    from ...run.index import RunEntry
    from ...run.runner import RemoteRunner
    from ...view import stacks as stack_text


def _flat_rank(text: str) -> int:
    """``--rank`` of ``%remote shell`` (:func:`...rank_shell.flat_rank`, imported when parsed)."""
    from ... import rank_shell

    return rank_shell.flat_rank(text)


@verb(
    "stacks",
    "each rank's stacks (py-spy; else state, wchan), folded",
    arg(
        "run", nargs="?", metavar="RUN", help="any unique part of the run's id (default: the newest running)"
    ),
    arg("--rank", dest="ranks", type=flat_ranks, metavar="N[,M…]", help="only these flat ranks"),
    arg("--point", type=dims(0), metavar="DIM=N,…", help="only the ranks at this point"),
    arg("--native", action="store_true", help="native (C/C++) frames too"),
    arg(
        "--actors",
        action="store_true",
        help="your actors' procs instead (the default when no run runs)",
    ),
    arg(
        "--session",
        nargs="?",
        const="",
        metavar="NAME",
        help="a session's namespaces instead (all, or NAME's)",
    ),
)
def stacks(
    cell: Cell,
    run: str | None,
    ranks: tuple[int, ...] | None,
    point: tuple[tuple[str, int], ...] | None,
    native: bool,
    actors: bool = False,
    session: str | None = None,
) -> None:
    from ....system import actor_procs
    from ...run import index
    from ...view import stacks as stack_text

    if ranks is not None and point is not None:
        raise ArgumentsError("%remote stacks: --rank and --point exclude each other")
    if actors and run is not None:
        raise ArgumentsError("%remote stacks: RUN or --actors, not both")
    if actors:
        cell.write(actor_stacks_text(cell, ranks, point, native))
        return
    if session is None and run is None and not actors:
        session = _session_default(cell)
    if session is not None:
        found = cell.sessions.stacks(session or None, native)
        chosen = [a for a in found if ranks is None or a.get("rank") in ranks]
        if not chosen:
            cell.write(
                f"no live namespace of {f'session {session}' if session else 'any session'} in this job\n"
            )
            return
        title = f"session {session}" if session else "every session"
        cell.write(stack_text.render("", "", stack_text.merge([chosen]), title=title))
        return
    if run is None:
        running = running_entries(cell.session, cell.runner)
        if not running and actor_procs.known():
            found, gone = actor_stacks(cell, ranks, point, native)
            if found:
                cell.write(stack_text.render_actors(found, gone))
                return
        if not running:
            cell.write(
                "no run is running in this context: %remote runs lists them, %remote stacks RUN picks one\n"
            )
            return
        entry = running[0]
    else:
        entry = index.find(run_entries(cell.session), run)
    cell.write(run_stacks(cell.runner, entry, None if ranks is None else list(ranks), point, native))


def _session_default(cell: Cell) -> str | None:
    """The session ``%remote stacks`` means when no run runs here and no actor procs live: the
    one last used, or the only one; '' (every session) when several and none used; None: no
    session, or a run is running (its stacks are the default)."""
    from ...run.sessions import BOOK, default_name

    try:
        if not (cell.session.layout.dir / cell.session.context / BOOK).is_file():  # no session: one stat
            return None
    except (AttributeError, OSError):  # a context without a folder (a stand-in): no book
        return None
    from ....system import actor_procs

    if actor_procs.known() or running_entries(cell.session, cell.runner):
        return None
    known = list(cell.sessions.shapes())
    if not known:
        return None
    try:
        return default_name(cell.sessions.last, known)
    except MonarchJupyterError:
        return ""


def run_stacks(
    runner: RemoteRunner,
    entry: RunEntry,
    ranks: list[int] | None,
    point: tuple[tuple[str, int], ...] | None = None,
    native: bool = False,
) -> str:
    """The verb's text for run ``entry``: these flat ranks' stacks (all: None), folded."""
    from ...view import stacks as stack_text

    answers = runner.call_all("stacks", entry.id, ranks, None if point is None else dict(point), native)
    return stack_text.render(entry.id, first_line(entry.command), stack_text.merge(answers))


def grid_stacks(session: JobContext, runner: RemoteRunner, run_id: str, ranks: list[int]) -> str:
    """The grid's Stacks button: run ``run_id``'s stacks of these flat ranks, folded."""
    from ...run import index

    return run_stacks(runner, index.find(run_entries(session), run_id), ranks)


def grid_usage(runner: RemoteRunner, run_id: str) -> list[dict[str, Any]]:
    """The grid's resources: run ``run_id``'s samples (``host.usage``), each with ``idle``
    (its CPU at ~0 % while the others work, :func:`.resources.idle`)."""
    from ...view import resources

    samples = resources.merge(runner.call_all("usage", [run_id], USAGE_INTERVAL)).get(run_id, [])
    flagged = resources.idle(samples)
    return [{**sample, "idle": i in flagged} for i, sample in enumerate(samples)]


def actor_stacks_text(
    cell: Cell,
    ranks: tuple[int, ...] | None = None,
    point: tuple[tuple[str, int], ...] | None = None,
    native: bool = False,
) -> str:
    """The stacks of the user's actor procs (those this kernel spawned that still live), folded
    (``%remote stacks --actors``' text)."""
    from ...view import stacks as stack_text

    return stack_text.render_actors(*actor_stacks(cell, ranks, point, native))


def actor_stacks(
    cell: Cell,
    ranks: tuple[int, ...] | None = None,
    point: tuple[tuple[str, int], ...] | None = None,
    native: bool = False,
) -> tuple[list[stack_text.Answer], int]:
    """``(the live actor procs' answers, how many known procs are gone)``: each host dumps its
    worker's children among the procs; those of the kernel's own host mesh (``this_host()``)
    are dumped from here. Procs no host has (after every host answered) are forgotten."""
    from ....system import actor_procs
    from ...host import dumps
    from ...view import stacks as stack_text

    chosen = [
        p
        for p in actor_procs.known()
        if (ranks is None or p["rank"] in ranks) and all(dict(p["point"]).get(d) == v for d, v in point or ())
    ]
    if not chosen:
        return [], 0
    local = cell.session.loop.run(dumps.actor_stacks(chosen, native, os.getpid()), timeout=ACTOR_WAIT)
    answers: list[list[dumps.Answer]] = [local]
    asked = True
    try:
        answers += cell.runner.call_all("actor_stacks", chosen, native, timeout=ACTOR_WAIT)
    except MonarchJupyterError:  # no job running: only the kernel's own procs can be found
        if not local:
            raise
        asked = False
    found = stack_text.actor_answers(answers, actor_procs.locate)
    pids = {r.get("pid") for r in found}
    gone = [p for p in chosen if p["pid"] not in pids]
    if asked:  # every host answered: a proc none of them has is gone
        actor_procs.forget(gone)
    return found, len(gone) if asked else 0


ACTOR_WAIT = 15.0  # seconds the hosts may take (each dump is bounded too)


def _context_lines(text: str) -> int:
    if not text.isdigit() or int(text) > MAX_CONTEXT:
        raise argparse.ArgumentTypeError(f"wants 0 to {MAX_CONTEXT} lines, got {text!r}")
    return int(text)


MAX_CONTEXT = 50


@verb(
    "grep",
    "a run's lines matching PATTERN, by rank, folded",
    arg("pattern", metavar="PATTERN", help="a Python regular expression"),
    arg("run", nargs="?", metavar="RUN", help="any unique part of the run's id (default: the newest run)"),
    arg("--rank", dest="ranks", type=flat_ranks, metavar="N[,M…]", help="only these flat ranks"),
    arg("--stream", choices=(OUT, ERR), help="only stdout (out) or stderr (err)"),
    arg("-i", dest="ignore_case", action="store_true", help="ignore case"),
    arg("-C", dest="context", type=_context_lines, default=0, metavar="N", help="N lines of context"),
)
def grep(
    cell: Cell,
    pattern: str,
    run: str | None,
    ranks: tuple[int, ...] | None,
    stream: str | None,
    ignore_case: bool,
    context: int,
) -> None:
    from ...host.search import compile_pattern
    from ...run import grep as grep_text
    from ...run import index

    try:
        regex = compile_pattern(pattern, ignore_case)
    except re.error as error:
        raise ArgumentsError(f"%remote grep: {pattern!r} is not a regular expression ({error})") from None
    entries = run_entries(cell.session)
    if not entries:
        raise RunsError("no runs in this context yet: %remote runs lists them")
    entry = entries[0] if run is None else index.find(entries, run)
    chosen = [r for r in entry.ranks if ranks is None or r.rank in ranks]
    streams = (stream,) if stream else (OUT, ERR)
    found: list[grep_text.Found] = []
    ask: set[tuple[int, str]] = {(r.rank, s) for r in chosen for s in streams}
    where = f"the hosts' files {entry.host_dir}/<rank>/out|err"
    log = Path(cell.session.root, entry.log) if entry.log else None
    if log is not None and log.exists():
        found, ask = grep_text.grep_log(log, regex, context, chosen, streams)
        where = f"log {entry.log}"
    if ask:
        try:
            query = GrepQuery(pattern, ignore_case, context, sorted({r for r, _ in ask}), list(streams))
            answers = cell.runner.call_all("grep", entry.id, tuple(query))  # plain tuple: see protocol
        except MonarchJupyterError as error:
            if not found:
                raise RunsError(
                    f"run {entry.id} has no kernel log and its hosts cannot be asked: {error}"
                ) from None
        else:
            hosts = [f for f in grep_text.from_hosts(answers, chosen) if (f.rank.rank, f.stream) in ask]
            keys = {(f.rank.rank, f.stream) for f in hosts}
            found = [f for f in found if (f.rank.rank, f.stream) not in keys] + hosts
            where += (
                f", and the hosts' files for {len(keys)} rank stream{'s' if len(keys) != 1 else ''}"
                if log
                else ""
            )
    cell.write(grep_text.render(entry.id, first_line(entry.command), pattern, found, where))


@verb("debug", "ranks waiting at a breakpoint (from any kernel)")
def debug(cell: Cell) -> None:
    from ....jobs import breakpoints

    cell.write(breakpoints.waiting_text(breakpoints.folder_of(cell.session)))


@verb(
    "shell",
    "a terminal with a shell on a rank (MONARCH_RANK_* set)",
    arg("--rank", type=_flat_rank, default=0, metavar="N", help="flat host rank (default 0)"),
    arg("--mesh", metavar="NAME", help="the mesh (default: the job's first)"),
)
def shell(cell: Cell, rank: int, mesh: str | None) -> None:
    """JupyterLab opens the terminal from the displayed payload; elsewhere its text is the command."""
    from ... import rank_shell

    job, _, folder, context = cell.session.running()
    target = rank_shell.ShellTarget(context, rank, mesh)
    point = rank_shell.checked_point(job, cell.session.host_meshes(), target)
    cell.display(rank_shell.bundle(target, folder, point))
