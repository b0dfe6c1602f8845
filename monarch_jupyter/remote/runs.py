"""Runs that outlive their kernel, on the kernel side: the runs index and the ``%remote`` verbs
``runs``, ``attach``, ``stop`` (and ``%%remote --detach``).

The index is one small JSON file per run, ``.monarch/<context>/runs/<run_id>.json`` next to
the run's log (``<run_id>.log``), written when the run starts and ends — never a pickle — so any
kernel in the folder lists the context's runs. Whether a rank still runs is asked of its host
(:mod:`.host.runs`: the rank folders there, their status files and the processes carrying the
run's marker): directly when the job is local (``ProcessJob``: the hosts are this machine, so it
works even with the workers gone), else through the actors (``runs_state`` / ``stop_runs``).

A run's id is its log's name, ``YYYYmmdd-HHMMSS-xxxxxx``; the verbs take any unique part of it.
No IPython here except through the magics object the dispatch is handed.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import queue
import time
from pathlib import Path
from typing import Any

from ..errors import MonarchJupyterError
from .args import RemoteArgs
from .host import layout
from .host import runs as hostruns
from .protocol import spec_to_wire

INDEX_LIMIT = 200  # newest entries read from the index (older ones are pruned with their logs)
VERBS = ("runs", "attach", "stop")
RUNNING = "running"
FINISHED = "finished"
STOPPED = "stopped"
LOST = "lost"


class RunsError(MonarchJupyterError):
    """A ``%remote runs / attach / stop`` problem, shown in one line."""


# ── the index ──────────────────────────────────────────────────────────
def index_dir(session: Any) -> Path:
    return session.layout.dir / session.context / "runs"


def _where(session: Any, plan: Any) -> Any:
    from .runner import where

    return getattr(plan, "where", None) or where(session)


def host_meta(session: Any, plan: Any) -> dict:
    """What each rank's folder on its host records about who started it."""
    here = _where(session, plan)
    return {
        "target": plan.target,
        "context": here.context,
        "folder": str(here.root),
        "kernel_pid": os.getpid(),
        "apply_id": _apply_id(session),
    }


def _apply_id(session: Any) -> str | None:
    attachment = getattr(session, "_attachment", None)  # (no call: the run is on its way already)
    job = getattr(attachment, "job", None) if attachment is not None else getattr(session, "_job", None)
    return getattr(job, "apply_id", None)


def new_entry(
    session: Any, run_id: str, args: RemoteArgs, plan: Any, log_path: Path | None, detached: bool = False
) -> dict:
    here = _where(session, plan)
    folder = here.runs_dir
    log = None
    if log_path is not None:
        try:
            log = os.path.relpath(log_path, here.root)
        except ValueError:
            log = str(log_path)
    return {
        "version": 1,
        "id": run_id,
        "path": str(folder / f"{run_id}.json"),
        "command": args.command[:4000],
        "mode": args.mode,
        "target": plan.target,
        "started": time.time(),
        "log": log,
        "host_dir": str(layout.runs_path() / run_id),
        "context": here.context,
        "apply_id": _apply_id(session),
        "local": bool(plan.local_pids),
        "detached": detached,
        "kernel_pid": os.getpid(),
        "plan": {
            "mesh": args.mesh,
            "all_meshes": args.all_meshes,
            "point": [list(p) for p in args.point] if args.point is not None else None,
            "ranks": list(args.ranks) if args.ranks is not None else None,
            "per_host": [list(p) for p in args.per_host] if args.per_host else None,
        },
        "ranks": [
            {"label": r.label, "mesh": r.mesh, "point": dict(r.point), "rank": r.rank} for r in plan.ranks
        ],
        "state": RUNNING,
    }


def save_entry(entry: dict) -> None:
    """Write the entry atomically (another kernel may be reading it)."""
    path = Path(entry["path"])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entry))
        os.replace(tmp, path)
    except OSError:  # the index is a convenience: a full disk must not fail the run
        pass


def end_entry(entry: dict, plan: Any, outcomes: dict, stop_reason: str | None, error: str | None) -> None:
    """Record how the run ended (from the ranks' exits the drive saw)."""
    failed = []
    for index, rank in enumerate(plan.ranks):
        returncode, why = outcomes.get(index, (None, error or "no exit seen"))
        if returncode != 0 or why:
            failed.append(f"{rank.label} ({why})" if why else f"{rank.label} (rc {returncode})")
    entry.update(
        state=STOPPED if stop_reason else FINISHED,
        stop_reason=stop_reason,
        failed=failed,
        ended=time.time(),
    )
    save_entry(entry)


def load_entries(session: Any) -> list[dict]:
    """The context's runs, newest first (at most ``INDEX_LIMIT``)."""
    folder = index_dir(session)
    try:
        names = sorted(
            (p.name for p in folder.iterdir() if p.name.endswith(".json") and not p.name.startswith(".")),
            reverse=True,
        )[:INDEX_LIMIT]
    except OSError:
        return []
    entries = []
    for name in names:
        entry = layout.read_json(folder / name)
        if entry and entry.get("id") == name[:-5] and isinstance(entry.get("ranks"), list):
            entry["path"] = str(folder / name)
            entries.append(entry)
    entries.sort(key=lambda e: e.get("started") or 0, reverse=True)  # ids order by the second only
    return entries


def prune_index(folder: Path, keep: int) -> None:
    """Drop entries beyond the newest ``keep`` (their logs go too), except runs still running."""
    for stale in sorted(folder.glob("*.json"))[:-keep]:
        entry = layout.read_json(stale)
        if entry and entry.get("state") == RUNNING:
            continue
        with contextlib.suppress(OSError):
            stale.unlink()


def find(entries: list[dict], token: str | None, running_only: bool = False) -> dict:
    """The entry ``token`` names (any unique part of its id); None: the newest running one."""
    if token is None:
        for entry in entries:
            if entry.get("state") == RUNNING:
                return entry
        raise RunsError(
            "no run is running in this context: %remote runs lists them, %remote attach RUN picks one"
        )
    matches = [e for e in entries if e["id"] == token] or [e for e in entries if token in e["id"]]
    if not matches:
        raise RunsError(f"no run {token!r} in this context: %remote runs lists them")
    if len(matches) > 1:
        raise RunsError(
            f"{token!r} matches {len(matches)} runs ({', '.join(e['id'] for e in matches[:4])}…): give more of the id"
        )
    return matches[0]


# ── what the hosts say ─────────────────────────────────────────────────
def _rank_dirs(entry: dict) -> list[str]:
    return [layout.rank_name(r["mesh"], r["rank"]) for r in entry["ranks"]]


def _ask_hosts(session: Any, runner: Any, entries: list[dict]) -> dict[str, dict] | None:
    """``{run_id: host_state}`` for ``entries`` (non-local runs), through the actors. None when the
    hosts cannot be asked (the job is not running)."""
    ids = [e["id"] for e in entries]
    if not ids:
        return {}
    if not session.attached:
        return None
    try:
        plan = runner.plan(RemoteArgs(command=":", all_meshes=True))
    except MonarchJupyterError:
        return None

    async def ask() -> dict:
        merged: dict[str, dict] = {}
        for target in plan.targets:
            states = await target.actors.runs_state.call(ids)
            for state in states.values():
                for run_id, found in state.items():
                    into = merged.setdefault(run_id, {"ranks": {}, "strays": []})
                    into["ranks"].update(found["ranks"])
                    into["strays"] = sorted(set(into["strays"]) | set(found["strays"]))
        return merged

    try:
        return session.loop.run(ask(), timeout=30)
    except Exception:
        return None


def _judge(entry: dict, host: dict | None) -> dict:
    """Fold what the hosts say into the entry: state, running ranks, failures, stray processes
    (processes carrying the run's marker outside its groups keep a run running)."""
    if host is None:
        if entry.get("state") == RUNNING:
            entry["live"] = False
        return entry
    entry["strays"] = host.get("strays", [])
    if entry.get("state") != RUNNING:
        if entry["strays"]:
            entry["state"] = RUNNING
            entry["running_ranks"] = []
        return entry
    ranks = host.get("ranks", {})
    running, failed, ended = [], [], []
    for r, name in zip(entry["ranks"], _rank_dirs(entry), strict=True):
        state = ranks.get(name)
        if state is None:
            failed.append(f"{r['label']} (no folder on its host: pruned or never started)")
            continue
        if state["state"] == "running":
            running.append(r["label"])
        elif state["state"] == "exited":
            ended.append(state.get("ended") or 0)
            if state.get("returncode") != 0:
                failed.append(f"{r['label']} (rc {state.get('returncode')})")
        else:
            failed.append(f"{r['label']} (killed or lost: no exit status)")
    entry["live"] = True
    entry["running_ranks"] = running
    if not running:
        entry.update(state=FINISHED, failed=failed, ended=max(ended) if ended else time.time())
        save_entry(_plain(entry))
        if entry["strays"]:
            entry["state"] = RUNNING
    return entry


def _plain(entry: dict) -> dict:
    """The entry as the index keeps it (without what the hosts said just now)."""
    return {k: v for k, v in entry.items() if k not in ("live", "running_ranks", "strays")}


def survey(session: Any, runner: Any | None, entries: list[dict]) -> list[dict]:
    """Ask the hosts about ``entries``: local runs here (the hosts are this machine; one scan of
    /proc for stray processes), others through the actors when ``runner`` is given and the job
    answers. Entries whose processes are all gone are recorded as finished."""
    local = [e for e in entries if e.get("local")]
    if local:
        strays = hostruns.marked_pids({e["id"] for e in local})
        running = [e["id"] for e in local if e.get("state") == RUNNING]
        states = hostruns.host_state(running, strays=strays) if running else {}
        for entry in local:
            host = states.get(entry["id"])
            if host is None:
                host = {"ranks": {}, "strays": sorted(strays.get(entry["id"], []))}
            _judge(entry, host)
    remote = [e for e in entries if not e.get("local")]
    if remote:
        states = _ask_hosts(session, runner, remote) if runner is not None else None
        for entry in remote:
            _judge(entry, None if states is None else states.get(entry["id"], {}))
    return entries


def refresh(session: Any, runner: Any, entries: list[dict]) -> list[dict]:
    return survey(session, runner, entries)


def running_entries(session: Any, runner: Any | None = None) -> list[dict]:
    """The context's runs that still run, or left processes running (asked of the hosts where
    they can be: without ``runner``, only local runs are checked, the rest as the index says)."""
    entries = survey(session, runner, load_entries(session))
    return [e for e in entries if e.get("state") == RUNNING]


# ── text ───────────────────────────────────────────────────────────────
def _when(ts: float | None) -> str:
    if not ts:
        return "-"
    return _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def state_text(entry: dict) -> str:
    state = entry.get("state")
    strays = entry.get("strays") or []
    if state == RUNNING:
        if entry.get("live") is False:
            return "running? (hosts not reachable)"
        ranks = entry.get("running_ranks")
        text = f"running ({len(ranks)}/{len(entry['ranks'])} ranks)" if ranks is not None else "running"
        if strays:
            text += f", {len(strays)} process{'es' if len(strays) != 1 else ''} outside its group (pid {', '.join(map(str, strays[:4]))})"
        return text
    if state == STOPPED:
        return f"stopped ({entry.get('stop_reason') or 'stopped'})"
    failed = entry.get("failed") or []
    if failed:
        return f"finished: {len(failed)} failed [{', '.join(failed[:3])}{', …' if len(failed) > 3 else ''}]"
    return "finished: ok"


def first_line(command: str, width: int = 40) -> str:
    line = (command.strip().splitlines() or [""])[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def runs_text(entries: list[dict], now: float | None = None) -> str:
    """``%remote runs``: one block per run, newest first."""
    if not entries:
        return (
            "no runs in this context yet: %%remote runs a cell, %%remote --detach runs it in the background"
        )
    now = time.time() if now is None else now
    lines = []
    for e in entries:
        end = e.get("ended") if e.get("state") != RUNNING else now
        duration = (end - e["started"]) if end and e.get("started") else None
        lines.append(f"{e['id']}  {state_text(e)}")
        lines.append(
            f"    {first_line(e.get('command', ''))!r} on {e.get('target')}"
            f"{' (detached)' if e.get('detached') else ''}"
        )
        lines.append(
            f"    started {_when(e.get('started'))} · {_duration(duration)}"
            f" · log {e.get('host_dir')}/<rank>/out|err" + (f" and {e['log']}" if e.get("log") else "")
        )
    return "\n".join(lines)


def restart_note(session: Any) -> str | None:
    """What ``%load_ext`` / ``%job`` say about runs still running (None: nothing to say)."""
    try:
        entries = running_entries(session)
    except Exception:
        return None
    if not entries:
        return None
    others = [e for e in entries if e.get("kernel_pid") != os.getpid()]
    n = len(entries)
    names = ", ".join(f"{e['id']} ({first_line(e.get('command', ''), 24)!r})" for e in entries[:3])
    whose = " (started by a previous kernel)" if others and len(others) == n else ""
    return (
        f"monarch_jupyter: {n} run{'s' if n != 1 else ''} still running{whose}: {names}"
        f"{', …' if n > 3 else ''}; %remote attach follows the newest, %remote stop RUN | --all stops them"
    )


# ── the verbs ──────────────────────────────────────────────────────────
def plan_for(runner: Any, entry: dict) -> Any:
    """The plan that reaches the run's ranks again (same meshes, per-host shape, selection)."""
    p = entry.get("plan") or {}
    args = RemoteArgs(
        command=entry.get("command") or ":",
        mode=entry.get("mode") or "bash",
        mesh=p.get("mesh"),
        all_meshes=bool(p.get("all_meshes")),
        point=tuple(tuple(x) for x in p["point"]) if p.get("point") is not None else None,
        ranks=tuple(p["ranks"]) if p.get("ranks") is not None else None,
        per_host=tuple(tuple(x) for x in p["per_host"]) if p.get("per_host") else None,
    )
    try:
        plan = runner.plan(args)
    except MonarchJupyterError as error:
        still = ""
        if entry.get("local"):  # its hosts are this machine: say what still runs
            survey(runner.session, None, [entry])
            ranks = entry.get("running_ranks") or []
            if ranks or entry.get("strays"):
                still = (
                    f"; its processes still run ({', '.join(ranks) or 'outside its group'}): "
                    f"%remote stop {entry['id']} or %job kill stops them"
                )
        raise RunsError(f"cannot follow run {entry['id']}: {error}{still}") from None
    if [r.label for r in plan.ranks] != [r["label"] for r in entry["ranks"]]:
        raise RunsError(
            f"run {entry['id']} ran on {entry.get('target')}; the job now has other ranks (it was re-applied?)"
        )
    return plan


def stop(session: Any, runner: Any, entries: list[dict]) -> dict[str, int]:
    """Stop these runs on every host (SIGINT → SIGTERM → SIGKILL, strays too); ``{id: processes}``."""
    if not entries:
        return {}
    ids = [e["id"] for e in entries]
    counts: dict[str, int] = {}
    if any(not e.get("local") for e in entries) and session.attached:
        try:
            plan = runner.plan(RemoteArgs(command=":", all_meshes=True))

            async def ask() -> None:
                for target in plan.targets:
                    for found in (await target.actors.stop_runs.call(ids)).values():
                        for run_id, n in found.items():
                            counts[run_id] = max(counts.get(run_id, 0), n)

            session.loop.run(ask(), timeout=60)
        except MonarchJupyterError:
            pass
    if any(e.get("local") for e in entries):  # the hosts are this machine: works with the workers gone
        for run_id, n in session.loop.run(hostruns.stop_runs(ids), timeout=60).items():
            counts[run_id] = max(counts.get(run_id, 0), n)
    for entry in entries:
        entry = _plain(entry)
        if entry.get("state") == RUNNING:
            entry.update(state=STOPPED, stop_reason="stopped", ended=time.time())
            save_entry(entry)
    return counts


def stop_for_kill(session: Any, runner: Any) -> str | None:
    """Before ``%job kill``: stop every run of the context still running; a line saying so."""
    try:
        entries = running_entries(session, runner)
    except Exception:
        return None
    if not entries:
        return None
    counts = stop(session, runner, entries)
    return (
        f"stopped {len(entries)} run{'s' if len(entries) != 1 else ''} first ({sum(counts.values())} processes): "
        + ", ".join(e["id"] for e in entries)
    )


def start_detached(session: Any, runner: Any, args: RemoteArgs, plan: Any, log_path: Path) -> str:
    """``%%remote --detach``: start on every rank, return at once with the run id."""
    run_id = log_path.stem
    spec = runner.spec(args, plan, run_id)
    entry = new_entry(session, run_id, args, plan, None, detached=True)
    save_entry(entry)

    async def launch() -> list:
        results = []
        for target in plan.targets:
            results.extend((await target.actors.start.call(run_id, target.mesh, spec_to_wire(spec))).values())
        return results

    try:
        results = session.loop.run(launch(), timeout=60)
    except Exception as error:
        entry.update(
            state=FINISHED, failed=[f"could not start: {type(error).__name__}: {error}"], ended=time.time()
        )
        save_entry(entry)
        raise RunsError(f"--detach: could not start the run: {type(error).__name__}: {error}") from None
    errors = [f"rank {rank}: {error}" for rank, _, error in results if error]
    if errors:
        stop(session, runner, [entry])
        entry.update(state=FINISHED, failed=errors, ended=time.time())
        save_entry(entry)
        raise RunsError("--detach: " + "; ".join(errors[:4]))
    return (
        f"run {run_id} started detached on {plan.target}: %remote attach {run_id} follows it, "
        f"%remote stop {run_id} stops it, %remote runs lists runs"
    )


def attach(magics: Any, token: str | None) -> None:
    """``%remote attach [RUN]``: the kept tail per rank, then live, as the original cell."""
    from .. import remote as remote_package
    from .model import RunState
    from .render import TextRenderer
    from .runner import RemoteError, RunHandle

    session, runner = magics.session, magics.runner
    entries = load_entries(session)
    if token is None:
        running = running_entries(session, runner)
        if not running:
            raise RunsError(
                "no run is running in this context: %remote runs lists them, %remote attach RUN picks one"
            )
        entry = running[0]
    else:
        entry = find(entries, token)
    plan = plan_for(runner, entry)
    state = RunState(
        command=entry.get("command", ""),
        mode=entry.get("mode", "bash"),
        target=plan.target,
        ranks=plan.ranks,
        started=entry.get("started") or time.time(),
        log_path=f"{entry.get('host_dir')}/<rank>/out|err",
        observers=[*remote_package.observers, *magics.observers],
        run_id=entry["id"],
    )
    magics._write(
        f"attached to run {entry['id']} ({first_line(entry.get('command', ''))!r}, started "
        f"{_when(entry.get('started'))}): the kept tail per rank, then live; full output in "
        f"{entry.get('host_dir')}/<rank>/out|err on each host; Ctrl-C stops following, not the run\n"
    )
    renderer = TextRenderer(state, live=True)
    sink: queue.SimpleQueue = queue.SimpleQueue()
    handle = RunHandle(session.loop)
    runner.follow(entry["id"], plan, sink, handle)
    magics._pump(state, renderer, sink, handle)
    if handle.stop_reason is not None:  # Ctrl-C: we stopped following; the run goes on
        magics._write(renderer.flush(0.0, force=True))
        magics._write(
            f"stopped following run {entry['id']}; it goes on: %remote attach {entry['id']} follows it again\n"
        )
        return
    magics._write(renderer.finish())
    from IPython.display import display

    display(state.mime_bundle(), raw=True)
    if entry.get("state") == RUNNING:
        entry = _plain(entry)
        entry.update(state=FINISHED, ended=time.time(), failed=[r.describe() for r in state.failing()])
        save_entry(entry)
    message = state.failure_message()
    if message:
        raise RemoteError(message)


def dispatch(magics: Any, verb: str, options: dict) -> None:
    """``%remote runs | attach [RUN] | stop RUN… | --all`` (parsed by :mod:`.args`)."""
    from IPython.core.error import UsageError

    from .runner import RemoteError

    session, runner = magics.session, magics.runner
    try:
        if verb == "runs":
            print(runs_text(refresh(session, runner, load_entries(session))))
        elif verb == "attach":
            attach(magics, options.get("run"))
        elif verb == "stop":
            tokens, every = options.get("runs") or [], options.get("all_runs")
            if bool(tokens) == bool(every):
                raise UsageError("%remote stop RUN… | --all (%remote runs lists them)")
            if every:
                chosen = running_entries(session, runner)
                if not chosen:
                    print("no run is running in this context")
                    return
            else:
                entries = load_entries(session)
                chosen = [find(entries, token) for token in tokens]
            counts = stop(session, runner, chosen)
            for entry in chosen:
                print(f"stopped run {entry['id']} ({counts.get(entry['id'], 0)} processes signalled)")
    except RemoteError:  # a rank of the attached run failed: as the original cell
        raise
    except MonarchJupyterError as error:
        raise UsageError(f"%remote {verb}: {error}") from None
