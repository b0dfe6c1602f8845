"""The ``%remote VERB …`` forms: each verb's parser and handler, registered together.

A verb is one :func:`verb`-decorated function: its name, the line ``%%remote?`` shows for it,
its arguments (:func:`arg`, as ``argparse``'s ``add_argument``) and its handler, called with the
:class:`Cell` it runs in and its parsed options as keywords. The parser goes where
``%remote``'s line is parsed (:data:`.args.VERBS`), the handler into :data:`REGISTRY`; the
magic looks a verb up there, and ``%%remote?`` lists them all. A handler's
:class:`~..errors.MonarchJupyterError` is shown as one ``%remote VERB: …`` line, a
:class:`~.errors.RemoteError` (a rank failed) as the error of the cell.

Adding a verb, e.g. ``%remote stacks`` (each rank's Python stacks), is one endpoint on the
actor and one entry here::

    @verb("stacks", "each rank's Python stacks", arg("--native", action="store_true", help="…"))
    def stacks(cell: Cell, native: bool) -> None:
        for text in cell.runner.call_all("stacks", native):
            cell.write(text)

Today's verbs are about runs that outlive their kernel (``%%remote --detach``, a restart):
``runs`` lists the context's runs (:mod:`.index`), asking their hosts which still run;
``attach`` follows one (the kept tail per rank, then live); ``stop`` stops runs on every host;
``stacks`` shows what a run's processes are doing, identical stacks folded (:mod:`.stacks`);
``shell`` a terminal with a shell on one rank (:mod:`..rank_shell`).
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .. import _timefmt, actor_procs, breakpoints, rank_shell
from ..errors import MonarchJupyterError
from ..magic_parser import ArgumentsError, MagicParser
from . import grep as grep_text
from . import index, resources
from . import stacks as stack_text
from .args import add_verb, dims, flat_ranks
from .drive import Plan, RunHandle
from .errors import RemoteError, RunsError
from .host import dumps
from .host.search import compile_pattern
from .index import FINISHED, STOPPED, RunEntry
from .model import ERR, OUT, Event, Observer, RunState
from .quiet import QuietWatch
from .render import TextRenderer
from .runner import RemoteRunner

if TYPE_CHECKING:
    from ..session import JobSession
    from .host.runs import RunOnHost

Handler = Callable[..., None]


class Cell(Protocol):
    """What a verb is handed by the magic: the session, its runner and the cell's output."""

    session: JobSession
    runner: RemoteRunner

    def run_observers(self) -> list[Observer]:
        """The observers a run shown in this cell gets (``remote.observers`` and the magic's)."""
        ...

    def write(self, text: str) -> None: ...

    def pump(
        self, state: RunState, renderer: TextRenderer, sink: queue.SimpleQueue[Event], handle: RunHandle
    ) -> bool:
        """Apply a run's events to ``state`` and show them until it finished; True if interrupted."""
        ...

    def display(self, bundle: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class Verb:
    name: str
    parser: MagicParser
    handler: Handler


#: verb name → its parser and handler, in the order ``%%remote?`` lists them
REGISTRY: dict[str, Verb] = {}


def arg(*flags: str, **options: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    """One argument of a verb, as ``parser.add_argument(*flags, **options)``."""
    return flags, options


def verb(
    name: str, description: str, *arguments: tuple[tuple[str, ...], dict[str, Any]]
) -> Callable[[Handler], Handler]:
    """Register the decorated function as ``%remote name``'s handler, with its parser."""

    def register(handler: Handler) -> Handler:
        parser = add_verb(name, description)
        for flags, options in arguments:
            parser.add_argument(*flags, **options)
        REGISTRY[name] = Verb(name, parser, handler)
        return handler

    return register


def dispatch(cell: Cell, name: str, options: dict[str, Any]) -> None:
    """Run verb ``name`` with the options its parser returned."""
    REGISTRY[name].handler(cell, **options)


# ── what the hosts say ─────────────────────────────────────────────────
def survey(runner: RemoteRunner | None, entries: list[RunEntry]) -> list[RunEntry]:
    """Ask the hosts about ``entries``: local runs here (the hosts are this machine), others
    through the actors when ``runner`` is given and the job answers. Entries whose processes
    are all gone are recorded as finished."""
    local = [e for e in entries if e.local]
    if local:
        index.survey_local(local)
    remote = [e for e in entries if not e.local]
    if remote:
        states = runner.host_states([e.id for e in remote]) if runner is not None else None
        for entry in remote:
            nowhere: RunOnHost = {"ranks": {}, "strays": []}  # a run no host holds
            index.judge(entry, None if states is None else states.get(entry.id, nowhere))
    return entries


def _entries(session: JobSession) -> list[RunEntry]:
    return index.load_entries(index.where(session).runs_dir)


def running_entries(session: JobSession, runner: RemoteRunner | None = None) -> list[RunEntry]:
    """The context's runs that still run, or left processes running (asked of the hosts where
    they can be: without ``runner``, only local runs are checked, the rest as the index says)."""
    return [e for e in survey(runner, _entries(session)) if e.is_running]


def plan_for(runner: RemoteRunner, entry: RunEntry) -> Plan:
    """The plan that reaches the run's ranks again (same meshes, per-host shape, selection)."""
    try:
        plan = runner.plan(entry.to_args())
    except MonarchJupyterError as error:
        still = ""
        if entry.local:  # its hosts are this machine: say what still runs
            survey(None, [entry])
            ranks = entry.seen.running_ranks if entry.seen else []
            if ranks or (entry.seen and entry.seen.strays):
                still = (
                    f"; its processes still run ({', '.join(ranks) or 'outside its group'}): "
                    f"%remote stop {entry.id} or %job kill stops them"
                )
        raise RunsError(f"cannot follow run {entry.id}: {error}{still}") from None
    if [r.label for r in plan.ranks] != [r.label for r in entry.ranks]:
        raise RunsError(
            f"run {entry.id} ran on {entry.target}; the job now has other ranks (it was re-applied?)"
        )
    return plan


# ── text ───────────────────────────────────────────────────────────────
def state_text(entry: RunEntry) -> str:
    seen = entry.seen
    if entry.is_running:
        if seen is not None and not seen.live:
            return "running? (hosts not reachable)"
        text = (
            f"running ({len(seen.running_ranks)}/{len(entry.ranks)} ranks)" if seen is not None else "running"
        )
        strays = seen.strays if seen is not None else []
        if strays:
            text += f", {len(strays)} process{'es' if len(strays) != 1 else ''} outside its group (pid {', '.join(map(str, strays[:4]))})"
        return text
    if entry.state == STOPPED:
        return f"stopped ({entry.stop_reason or 'stopped'})"
    failed = entry.failed
    if failed:
        return f"finished: {len(failed)} failed [{', '.join(failed[:3])}{', …' if len(failed) > 3 else ''}]"
    return "finished: ok"


def first_line(command: str, width: int = 40) -> str:
    line = (command.strip().splitlines() or [""])[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def runs_text(entries: list[RunEntry], now: float | None = None, usage: dict[str, str] | None = None) -> str:
    """``%remote runs``: one block per run, newest first (``usage``: a running run's resources line)."""
    if not entries:
        return (
            "no runs in this context yet: %%remote runs a cell, %%remote --detach runs it in the background"
        )
    now = time.time() if now is None else now
    lines = []
    for e in entries:
        end = now if e.is_running else e.ended
        duration = (end - e.started) if end and e.started else None
        lines.append(f"{e.id}  {state_text(e)}")
        lines.append(f"    {first_line(e.command)!r} on {e.target}{' (detached)' if e.detached else ''}")
        lines.append(
            f"    started {_timefmt.local_time(e.started)} · {_timefmt.span(duration)}"
            f" · log {e.host_dir}/<rank>/out|err" + (f" and {e.log}" if e.log else "")
        )
        if usage and usage.get(e.id):
            lines.append(f"    {usage[e.id]}")
    return "\n".join(lines)


def restart_note(session: JobSession) -> str | None:
    """What ``%load_ext`` / ``%job`` say about runs still running (None: nothing to say)."""
    try:
        entries = running_entries(session)
    except Exception:
        return None
    if not entries:
        return None
    others = [e for e in entries if e.kernel_pid != os.getpid()]
    n = len(entries)
    names = ", ".join(f"{e.id} ({first_line(e.command, 24)!r})" for e in entries[:3])
    whose = " (started by a previous kernel)" if others and len(others) == n else ""
    return (
        f"monarch_jupyter: {n} run{'s' if n != 1 else ''} still running{whose}: {names}"
        f"{', …' if n > 3 else ''}; %remote attach follows the newest, %remote stop RUN | --all stops them"
    )


def stop_for_kill(session: JobSession, runner: RemoteRunner) -> str | None:
    """Before ``%job kill``: stop every run of the context still running; a line saying so."""
    try:
        entries = running_entries(session, runner)
    except Exception:
        return None
    if not entries:
        return None
    counts = runner.stop_runs(entries, by="%job kill")
    return (
        f"stopped {len(entries)} run{'s' if len(entries) != 1 else ''} first ({sum(counts.values())} processes): "
        + ", ".join(e.id for e in entries)
    )


# ── the verbs ──────────────────────────────────────────────────────────
@verb("runs", "this context's runs, newest first")
def list_runs(cell: Cell) -> None:
    entries = survey(cell.runner, _entries(cell.session))
    cell.write(runs_text(entries, usage=_usage(cell.runner, [e for e in entries if e.is_running])) + "\n")


USAGE_INTERVAL = 0.25  # seconds between the two looks at each rank's CPU time


def _usage(runner: RemoteRunner, running: list[RunEntry]) -> dict[str, str]:
    """Each running run's resources line, sampled on its hosts now ({} when they cannot be asked)."""
    if not running or not runner.session.attached:
        return {}
    try:
        merged = resources.merge(runner.call_all("usage", [e.id for e in running], USAGE_INTERVAL))
    except Exception:  # the job went away: the runs list is still worth showing
        return {}
    lines = {}
    for entry in running:
        labels = {(r.mesh, r.rank): r.label for r in entry.ranks}
        lines[entry.id] = resources.usage_line(merged.get(entry.id, []), labels)
    return lines


@verb(
    "attach",
    "follow a run from any kernel (default: the newest)",
    arg("run", nargs="?", metavar="RUN", help="any unique part of the run's id"),
)
def attach(cell: Cell, run: str | None) -> None:
    """The kept tail per rank, then live, as the original cell; Ctrl-C stops following."""
    session, runner = cell.session, cell.runner
    if run is None:
        running = running_entries(session, runner)
        if not running:
            raise RunsError(
                "no run is running in this context: %remote runs lists them, %remote attach RUN picks one"
            )
        entry = running[0]
    else:
        entry = index.find(_entries(session), run)
    plan = plan_for(runner, entry)
    logs = f"{entry.host_dir}/<rank>/out|err"
    state = RunState(
        command=entry.command,
        mode=entry.mode,
        target=plan.target,
        ranks=plan.ranks,
        started=entry.started or time.time(),
        log_path=logs,
        observers=cell.run_observers(),
        run_id=entry.id,
    )
    cell.write(
        f"attached to run {entry.id} ({first_line(entry.command)!r}, started "
        f"{_timefmt.local_time(entry.started)}): the kept tail per rank, then live; full output in "
        f"{logs} on each host; Ctrl-C stops following, not the run\n"
    )
    renderer = TextRenderer(state, live=True, quiet=QuietWatch(state))
    sink: queue.SimpleQueue[Event] = queue.SimpleQueue()
    handle = RunHandle(session.loop)
    runner.follow(entry.id, plan, sink, handle)
    cell.pump(state, renderer, sink, handle)
    if handle.stop_reason is not None:  # Ctrl-C: we stopped following; the run goes on
        cell.write(renderer.flush(0.0, force=True))
        cell.write(
            f"stopped following run {entry.id}; it goes on: %remote attach {entry.id} follows it again\n"
        )
        return
    cell.write(renderer.finish())
    cell.display(state.mime_bundle())
    if entry.is_running:
        entry.end(FINISHED, failed=[r.describe() for r in state.failing()])
    message = state.failure_message()
    if message:
        raise RemoteError(message)


@verb(
    "stop",
    "stop runs from any kernel, as Ctrl-C",
    arg("runs", nargs="*", metavar="RUN", help="any unique part of a run's id"),
    arg("--all", dest="all_runs", action="store_true", help="every run of the context still running"),
)
def stop(cell: Cell, runs: list[str], all_runs: bool) -> None:
    if bool(runs) == bool(all_runs):
        raise ArgumentsError("%remote stop RUN… | --all (%remote runs lists them)")
    if all_runs:
        chosen = running_entries(cell.session, cell.runner)
        if not chosen:
            cell.write("no run is running in this context\n")
            return
    else:
        entries = _entries(cell.session)
        chosen = survey(cell.runner, [index.find(entries, token) for token in runs])
    live = [e for e in chosen if e.is_running]
    live_ids = {e.id for e in live}
    counts = cell.runner.stop_runs(live, by="%remote stop")
    for entry in chosen:
        if entry.id in live_ids:
            cell.write(f"stopped run {entry.id} ({counts.get(entry.id, 0)} processes signalled)\n")
        else:
            ended = (
                f"been stopped ({entry.stop_reason or 'stopped'})"
                if entry.state == STOPPED
                else f"finished ({state_text(entry).removeprefix('finished: ')})"
            )
            cell.write(f"run {entry.id} had already {ended}; nothing to stop\n")


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
)
def stacks(
    cell: Cell,
    run: str | None,
    ranks: tuple[int, ...] | None,
    point: tuple[tuple[str, int], ...] | None,
    native: bool,
    actors: bool = False,
) -> None:
    if ranks is not None and point is not None:
        raise ArgumentsError("%remote stacks: --rank and --point exclude each other")
    if actors and run is not None:
        raise ArgumentsError("%remote stacks: RUN or --actors, not both")
    if actors:
        cell.write(actor_stacks_text(cell, ranks, point, native))
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
        entry = index.find(_entries(cell.session), run)
    cell.write(run_stacks(cell.runner, entry, None if ranks is None else list(ranks), point, native))


def run_stacks(
    runner: RemoteRunner,
    entry: RunEntry,
    ranks: list[int] | None,
    point: tuple[tuple[str, int], ...] | None = None,
    native: bool = False,
) -> str:
    """The verb's text for run ``entry``: these flat ranks' stacks (all: None), folded."""
    answers = runner.call_all("stacks", entry.id, ranks, None if point is None else dict(point), native)
    return stack_text.render(entry.id, first_line(entry.command), stack_text.merge(answers))


def grid_stacks(session: JobSession, runner: RemoteRunner, run_id: str, ranks: list[int]) -> str:
    """The grid's Stacks button: run ``run_id``'s stacks of these flat ranks, folded."""
    return run_stacks(runner, index.find(_entries(session), run_id), ranks)


def grid_usage(runner: RemoteRunner, run_id: str) -> list[dict[str, Any]]:
    """The grid's resources: run ``run_id``'s samples (``host.usage``), each with ``idle``
    (its CPU at ~0 % while the others work, :func:`.resources.idle`)."""
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
    try:
        regex = compile_pattern(pattern, ignore_case)
    except re.error as error:
        raise ArgumentsError(f"%remote grep: {pattern!r} is not a regular expression ({error})") from None
    entries = _entries(cell.session)
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
            answers = cell.runner.call_all(
                "grep", entry.id, pattern, ignore_case, context, sorted({r for r, _ in ask}), list(streams)
            )
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
    cell.write(breakpoints.waiting_text(breakpoints.folder_of(cell.session)))


@verb(
    "shell",
    "a terminal with a shell on a rank (MONARCH_RANK_* set)",
    arg("--rank", type=rank_shell.flat_rank, default=0, metavar="N", help="flat host rank (default 0)"),
    arg("--mesh", metavar="NAME", help="the mesh (default: the job's first)"),
)
def shell(cell: Cell, rank: int, mesh: str | None) -> None:
    """JupyterLab opens the terminal from the displayed payload; elsewhere its text is the command."""
    job, _, folder, context = cell.session.running()
    target = rank_shell.ShellTarget(context, rank, mesh)
    point = rank_shell.checked_point(job, cell.session.host_meshes(), target)
    cell.display(rank_shell.bundle(target, folder, point))
