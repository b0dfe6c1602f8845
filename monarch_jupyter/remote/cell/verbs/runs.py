"""The verbs about runs that outlive their kernel: ``runs`` lists the context's runs
(:mod:`...run.index`), asking their hosts which still run; ``attach`` follows one (the kept tail per
rank, then live); ``stop`` stops runs on every host. Also the lines ``%load_ext`` and ``%job kill``
print about runs still running."""

from __future__ import annotations

import os
import queue
import time
from typing import TYPE_CHECKING

from ....errors import MonarchJupyterError
from ....text import timefmt as _timefmt
from ....text.parser import ArgumentsError
from ...errors import RemoteError, RunsError
from .registry import Cell, arg, verb

if TYPE_CHECKING:  # imported where used: these verbs are declared at %load_ext
    from ....jobs.facade import JobContext
    from ...host.runs import RunOnHost
    from ...run.drive import Plan
    from ...run.index import RunEntry
    from ...run.runner import RemoteRunner


# ── what the hosts say ─────────────────────────────────────────────────
def survey(runner: RemoteRunner | None, entries: list[RunEntry]) -> list[RunEntry]:
    """Ask the hosts about ``entries``: local runs here (the hosts are this machine), others
    through the actors when ``runner`` is given and the job answers. Entries whose processes
    are all gone are recorded as finished."""
    from ...run import index

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


def run_entries(session: JobContext) -> list[RunEntry]:
    """The context's runs, newest first, as its index records them."""
    from ...run import index

    return index.load_entries(index.where(session).runs_dir)


def running_entries(session: JobContext, runner: RemoteRunner | None = None) -> list[RunEntry]:
    """The context's runs that still run, or left processes running (asked of the hosts where
    they can be: without ``runner``, only local runs are checked, the rest as the index says)."""
    return [e for e in survey(runner, run_entries(session)) if e.is_running]


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
    from ...run.index import STOPPED

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


def has_records(session: JobContext) -> bool:
    """Whether the context's runs index holds any run (``index.where``'s folder, read without
    importing the index: ``%load_ext`` and ``%job`` ask, and usually there is none)."""
    try:
        with os.scandir(session.layout.dir / session.context / "runs") as found:
            return any(e.name.endswith(".json") and not e.name.startswith(".") for e in found)
    except OSError:
        return False


def restart_note(session: JobContext) -> str | None:
    """What ``%load_ext`` / ``%job`` say about runs still running (None: nothing to say)."""
    try:
        if not has_records(session):
            return None
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


def stop_for_kill(session: JobContext, runner: RemoteRunner) -> str | None:
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
    entries = survey(cell.runner, run_entries(cell.session))
    cell.write(runs_text(entries, usage=_usage(cell.runner, [e for e in entries if e.is_running])) + "\n")


USAGE_INTERVAL = 0.25  # seconds between the two looks at each rank's CPU time


def _usage(runner: RemoteRunner, running: list[RunEntry]) -> dict[str, str]:
    """Each running run's resources line, sampled on its hosts now ({} when they cannot be asked)."""
    from ...view import resources

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
    from ...run import index
    from ...run.drive import RunHandle
    from ...run.index import FINISHED
    from ...view.model import Event, RunState
    from ...view.quiet import QuietWatch
    from ...view.render import TextRenderer

    session, runner = cell.session, cell.runner
    if run is None:
        running = running_entries(session, runner)
        if not running:
            raise RunsError(
                "no run is running in this context: %remote runs lists them, %remote attach RUN picks one"
            )
        entry = running[0]
    else:
        entry = index.find(run_entries(session), run)
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
    from ...run import index
    from ...run.index import STOPPED

    if bool(runs) == bool(all_runs):
        raise ArgumentsError("%remote stop RUN… | --all (%remote runs lists them)")
    if all_runs:
        chosen = running_entries(cell.session, cell.runner)
        if not chosen:
            cell.write("no run is running in this context\n")
            return
    else:
        entries = run_entries(cell.session)
        chosen = survey(cell.runner, [index.find(entries, token) for token in runs])
    live = [e for e in chosen if e.is_running]
    live_ids = {e.id for e in live}
    counts = cell.runner.stop_runs(live, by="%remote stop")
    for entry in chosen:
        if entry.id in live_ids and counts.get(entry.id, 0):
            cell.write(f"stopped run {entry.id} ({counts[entry.id]} processes signalled)\n")
        elif entry.id in live_ids:  # nothing was signalled: say so, never "stopped"
            cell.write(
                f"run {entry.id}: no process of it was found to signal (a --session cell runs in its "
                "namespace: %remote session stop NAME ends it; a cell of a kernel that is gone held "
                "at a breakpoint is freed by the next cell)\n"
            )
        else:
            ended = (
                f"been stopped ({entry.stop_reason or 'stopped'})"
                if entry.state == STOPPED
                else f"finished ({state_text(entry).removeprefix('finished: ')})"
            )
            cell.write(f"run {entry.id} had already {ended}; nothing to stop\n")
