"""A shell on one rank of a context's job: ``python -m monarch_jupyter.remote.rank_shell --rank N``.

Run in a terminal (a JupyterLab terminal opened by ``%remote shell`` or the sidebar, or any
terminal) in the notebook's folder. It attaches to the context's job as a kernel does (the
signed cache: :mod:`..jobs.signing`), without the job's services (no admin, no telemetry sink in
this process), and runs Monarch's own shell (``monarch.job.shell``: a pty-backed ``$SHELL -i``
in a proc on that rank's host) with the rank's environment as ``%%remote`` sets it
(``MONARCH_RANK_<dim>``, ``MONARCH_SIZE_<dim>``; Monarch's own shell leaves them empty).

The terminal can close at any moment (a tab shut down sends SIGHUP, then SIGKILL): the Monarch
client runs in a child process of its own session, which the terminal's signals do not reach;
it stops the remote shell's proc when its input ends (the pty closed) or its parent is gone, and
stops waiting for that stop after a grace (a killed job's hosts never answer it).

Bad input (no job, a rank out of range, a dead or stopped worker) is one line on stderr and
exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import shlex
import signal
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import MonarchJupyterError
from ..jobs.contexts import Layout, check_name
from ..runtime import introspect as _introspect
from ..system import procfs as _procfs

MODULE = "monarch_jupyter.remote.rank_shell"
MIME = "application/vnd.monarch.shell+json"
USAGE_STATUS = 2
PARENT_POLL = 0.5  # seconds between two looks at whether the terminal's process is gone
STOP_GRACE = 10.0  # seconds the remote shell's stop may take before we stop waiting for it


class ShellError(MonarchJupyterError):
    """Why no shell could be opened: one line."""


@dataclass(frozen=True)
class ShellTarget:
    """Which rank: a context of a folder, a mesh (None: the first) and a flat host rank."""

    context: str | None
    rank: int
    mesh: str | None = None
    hold: bool = False  # after an error, wait for Enter (a terminal opened for us closes when we exit)


# ── pure: the command, the arguments, the environment ─────────────────────
def command(target: ShellTarget, python: str | None = None) -> list[str]:
    """The argv that opens this shell, run in the notebook's folder. ``-P``: ``-m`` would put
    that folder first on the import path, and whoever can write there would choose our code."""
    argv = [python or sys.executable, "-P", "-m", MODULE, "--rank", str(target.rank)]
    if target.context:
        argv += ["--context", target.context]
    if target.mesh:
        argv += ["--mesh", target.mesh]
    return argv


def command_line(target: ShellTarget, folder: str, python: str | None = None) -> str:
    """The one line to paste in a terminal: ``cd FOLDER && python -m …``."""
    return f"cd {shlex.quote(folder)} && {shlex.join(command(target, python))}"


def flat_rank(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"wants a flat rank 0, 1, …, got {text!r}")
    return int(text)


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog=f"python -m {MODULE}",
        description="An interactive shell on one rank of this folder's Monarch job, "
        "with MONARCH_RANK_* / MONARCH_SIZE_* set as %%remote sets them.",
    )
    parse.add_argument("--rank", type=flat_rank, default=0, metavar="N", help="flat host rank (default 0)")
    parse.add_argument("--context", metavar="NAME", help="the context (default: the folder's active one)")
    parse.add_argument("--mesh", metavar="NAME", help="the mesh (default: the job's first)")
    parse.add_argument("--hold", action="store_true", help="after an error, wait for Enter before exiting")
    return parse


def parse_args(argv: Sequence[str]) -> ShellTarget:
    """The target named by ``argv``; ArgumentsError (one line) on bad input."""
    from ..text.parser import ArgumentsError

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> Any:  # one line, no usage block, no exit
            raise ArgumentsError(f"{self.prog}: {message}")

    parse = parser()
    parse.__class__ = _Parser
    ns = parse.parse_args(list(argv))
    if ns.context is not None:
        try:
            check_name(ns.context)
        except MonarchJupyterError as error:
            raise ArgumentsError(f"{parse.prog}: {error}") from None
    return ShellTarget(ns.context, ns.rank, ns.mesh, ns.hold)


def points(sizes: dict[str, int]) -> list[dict[str, int]]:
    """Row-major points of an extent: a flat rank is a position in this list."""
    out: list[dict[str, int]] = [{}]
    for name, size in sizes.items():
        out = [{**p, name: i} for p in out for i in range(size)]
    return out


def rank_env(point: dict[str, int], sizes: dict[str, int]) -> dict[str, str]:
    """``MONARCH_RANK_<dim>`` and ``MONARCH_SIZE_<dim>``, as a ``%%remote`` rank has them."""
    env = {f"MONARCH_RANK_{k}": str(v) for k, v in point.items()}
    env.update({f"MONARCH_SIZE_{k}": str(v) for k, v in sizes.items()})
    return env


def pick(meshes: dict[str, dict[str, int]], target: ShellTarget) -> tuple[str, dict[str, int]]:
    """The mesh name and the point of ``target.rank`` among ``meshes`` (name → host sizes)."""
    if not meshes:
        raise ShellError("the job has no host meshes")
    name = target.mesh or next(iter(meshes))
    if name not in meshes:
        raise ShellError(f"no mesh {name!r} in the job; it has: {', '.join(meshes)}")
    all_points = points(meshes[name])
    if target.rank >= len(all_points):
        raise ShellError(
            f"rank {target.rank} is out of range: mesh {name} has {len(all_points)} "
            f"rank{'s' if len(all_points) != 1 else ''} (0–{len(all_points) - 1})"
        )
    return name, all_points[target.rank]


def point_label(point: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in point.items())


def bundle(
    target: ShellTarget,
    folder: str,
    point: dict[str, int],
    python: str | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """What ``%remote shell`` displays: the payload our labextension opens a terminal from
    (``MIME``; ``created`` and ``id`` let it open one only for a fresh output, not a saved one)
    and, for every other front end, the one command to run in a terminal."""
    line = command_line(target, folder, python)
    where = f"rank {target.rank} ({point_label(point)})" + (f" of mesh {target.mesh}" if target.mesh else "")
    payload = {
        "version": 1,
        "folder": folder,
        "context": target.context,
        "rank": target.rank,
        "mesh": target.mesh,
        "point": point_label(point),
        "command": line,
        "created": time.time() if now is None else now,
        "id": uuid.uuid4().hex,
    }
    return {MIME: payload, "text/plain": f"a shell on {where}: run in a terminal\n  {line}"}


# ── the job ───────────────────────────────────────────────────────────────
def checked_point(job: Any, meshes: dict[str, Any], target: ShellTarget) -> dict[str, int]:
    """The point of ``target``'s rank in the running ``job`` (``meshes``: its host meshes),
    after the checks a shell needs (its workers alive and not stopped); ShellError otherwise."""
    from ..jobs import engines

    engine = engines.engine_for(job)
    if engine.workers_are_local:
        _check_workers(engine.local_processes(job))
    return pick(_sizes(meshes), target)[1]


def _sizes(meshes: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {name: {k: int(v) for k, v in dict(mesh.sizes).items()} for name, mesh in meshes.items()}


def _check_workers(pids: dict[str, int]) -> None:
    for key, pid in pids.items():
        if not _procfs.alive(pid):
            raise ShellError(
                f"the job is not healthy: worker {key} (pid {pid}) is dead; "
                "run %job kill then %job apply to start it again"
            )
        if _procfs.stopped(pid):
            raise ShellError(f"the job is not healthy: {_procfs.stopped_line(key, pid)}")


def load(folder: str, context: str | None) -> Any:
    """The context's running job, from its signed cache; ShellError (one line) when none runs."""
    from ..jobs import engines
    from ..jobs.store import JobStore
    from ..runtime import chatter as _quiet

    layout = Layout(folder)
    name = context or layout.current()
    if context and not layout.exists(name):
        raise ShellError(f"no context {name!r} in {folder}: %job context ls lists them")
    _quiet.install()
    job = JobStore(layout).load(name)
    if job is None:
        raise ShellError(f"no job in context {name!r}: run %job apply --local hosts=2 first")
    engine = engines.engine_for(job)
    if engine.workers_are_local:
        _check_workers(engine.local_processes(job))
    if not engine.is_alive(job):
        raise ShellError(f"the job in context {name!r} is not running: %job apply starts it again")
    engine.before_connect(job)
    return job


def host_mesh_for(job: Any, target: ShellTarget) -> tuple[Any, dict[str, str]]:
    """The singleton host mesh of ``target``'s rank and the rank's environment."""
    meshes = _introspect.bare_host_meshes(job)
    sizes = _sizes(meshes)
    name, point = pick(sizes, target)
    mesh = meshes[name].slice(**point) if point else meshes[name]
    return mesh, rank_env(point, sizes[name])


# ── the terminal ─────────────────────────────────────────────────────────
def _watch_parent(parent: int) -> None:
    """In the child: when the terminal's process is gone, interrupt the shell (its procs stop)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL)
        signal.raise_signal(signal.SIGINT)  # asyncio.run cancels the shell: its procs stop
        time.sleep(STOP_GRACE)
        # still here: the stop waits on a host that is gone (the job was killed meanwhile); a
        # second interrupt leaves asyncio.run, and if even that hangs, we exit
        signal.raise_signal(signal.SIGINT)
        time.sleep(STOP_GRACE)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="monarch-jupyter-shell-parent").start()


def _hold(parent: int) -> None:
    """Wait for a line on stdin (or its end, or the terminal's process gone)."""
    print("press Enter to close this terminal", file=sys.stderr, flush=True)
    while os.getppid() == parent:
        try:
            ready, _, _ = select.select([sys.stdin], [], [], PARENT_POLL)
        except (OSError, ValueError):
            return
        if ready:
            return


def _child(target: ShellTarget, parent: int) -> int:
    """The Monarch client, in a session of its own: opens the shell and forwards the pty."""
    os.setsid()  # the terminal's SIGHUP / SIGKILL of its process do not reach us
    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, lambda *_: signal.raise_signal(signal.SIGINT))
    try:
        job = load(os.getcwd(), target.context)
        mesh, env = host_mesh_for(job, target)
    except MonarchJupyterError as error:
        print(f"{MODULE}: {error}", file=sys.stderr, flush=True)
        if target.hold:
            _hold(parent)
        return USAGE_STATUS
    from monarch.job import shell

    _watch_parent(parent)
    label = ",".join(f"{k.removeprefix('MONARCH_RANK_')}={v}" for k, v in env.items() if "_RANK_" in k)
    print(f"monarch_jupyter: a shell on rank {target.rank} ({label}); exit or Ctrl-D ends it", flush=True)
    try:
        return int(shell(mesh, env=env))
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # Monarch's own failure (a proc that cannot spawn): one line
        print(f"{MODULE}: the shell failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        if target.hold:
            _hold(parent)
        return 1


def _forward_winch(child: int) -> None:
    def forward(*_: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGWINCH)

    signal.signal(signal.SIGWINCH, forward)


def run(target: ShellTarget) -> int:
    """Fork the client (see the module's docstring); wait for it and return its status."""
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        status = 1
        try:
            status = _child(target, parent)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    _forward_winch(child)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the remote shell
    while True:
        try:
            _, status = os.waitpid(child, 0)
        except InterruptedError:
            continue
        return os.waitstatus_to_exitcode(status) if status else 0


def main(argv: Sequence[str] | None = None) -> int:
    from ..text.parser import ArgumentsError

    try:
        target = parse_args(sys.argv[1:] if argv is None else argv)
    except ArgumentsError as error:
        print(error, file=sys.stderr)
        return USAGE_STATUS
    return run(target)


if __name__ == "__main__":
    sys.exit(main())
