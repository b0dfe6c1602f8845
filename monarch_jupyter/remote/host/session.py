"""The worker side of ``%%remote python --session``: each rank's namespace process
(:mod:`.session_server`), found or started by the rank's actor, and one cell run in it.

A rank's namespace lives in ``<runs root>/.sessions/<job tag>/<name>/<mesh>.<rank>/``
(0700): ``sock`` (the server's Unix socket), ``record.json`` (its pid, start tick, the host
worker that owns it) and ``server.log`` (what it printed between cells). The job tag is a
hash of the job's allocation, so two jobs on one machine never share a namespace, and a
kernel that re-attaches to the job finds the same ones.

:class:`SessionCell` is a cell running in a namespace with the interface of
:class:`~.capture.CapturedProcess` (the actor follows either alike): its output is the rank
folder's files, its end the server's answer (and ``status``, for whoever follows it later). A
stop is Ctrl-C only (SIGINT, repeated): a namespace is never killed by a cell's stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...system import procfs as _procfs
from . import session_server as server
from .capture import RankOutput
from .layout import read_json, runs_root
from .tail import LAST_BYTES

SESSIONS = ".sessions"  # in the runs root: a dot name, so run pruning never takes it
RECORD = "record.json"
SOCK = "sock"
START_TIMEOUT = 60.0  # seconds a new namespace process may take to listen
ASK_TIMEOUT = 5.0  # a ping or a stop's answer
SLICE = 0.00025  # while a quick cell runs, how often the answer and the files are looked at
INTERRUPTS = 3  # SIGINTs a stop sends (``grace`` apart) before it gives up: the namespace stays
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,39}")

# the namespace process's program: the server's main, sent by value on stdin (see session_server)
BOOT = (
    "import os, pickle, sys\n"
    "main, args = pickle.load(sys.stdin.buffer)\n"
    "null = os.open(os.devnull, os.O_RDONLY); os.dup2(null, 0); os.close(null)\n"
    "main(*args)\n"
)


class NamespaceError(RuntimeError):
    """Why a rank's namespace cannot be used: one line."""


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise NamespaceError(
            f"bad session name {name!r}: a letter or _, then letters, digits, _ . - (at most 40)"
        )
    return name


def job_tag(job: str) -> str:
    return hashlib.sha256(job.encode()).hexdigest()[:12]


def sessions_root(root: Path | None = None) -> Path:
    """The runs root's ``.sessions`` (absent, or a real folder of ours): a link there would
    carry every session's socket and record elsewhere, so it is refused as the runs root's are."""
    base = (root or runs_root()) / SESSIONS
    try:
        info = os.lstat(base)
    except FileNotFoundError:
        return base
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise NamespaceError(f"{base} is not a folder of yours (a link?): remove it, sessions are kept there")
    return base


def session_dir(job: str, name: str, key: str, rank: int, root: Path | None = None) -> Path:
    return sessions_root(root) / job_tag(job) / check_name(name) / f"{key}.{rank}"


def _private_dirs(folder: Path) -> None:
    """``folder`` and its parents under the runs root, each 0700."""
    for parent in reversed([folder, *folder.parents]):
        if parent.name and not parent.exists():
            with contextlib.suppress(FileExistsError):
                os.mkdir(parent, 0o700)


# ── asking a namespace process ────────────────────────────────────────
def connect(sock_path: Path) -> socket.socket:
    """A connection to the namespace listening on ``sock_path`` (at most ``ASK_TIMEOUT`` s)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(ASK_TIMEOUT)
        with server.unix_address(str(sock_path)) as address:
            conn.connect(address)
    except BaseException:
        conn.close()
        raise
    return conn


def ask(sock_path: Path, message: dict[str, Any], timeout: float | None = ASK_TIMEOUT) -> dict[str, Any]:
    """One request, its answer (blocking, at most ``timeout`` s per read; None: as long as the
    namespace takes, e.g. to evaluate a pull)."""
    with connect(sock_path) as conn:
        conn.settimeout(timeout)
        server.send_message(conn, message)
        return server.recv_message(conn)


def alive(record: dict[str, Any] | None) -> bool:
    """Whether the namespace process of ``record`` is still the one it records."""
    return record is not None and _procfs.alive(int(record["pid"]), record.get("start_ticks"))


def read_record(folder: Path) -> dict[str, Any] | None:
    return read_json(folder / RECORD)


def start(folder: Path, env: dict[str, str], workdir: str | None, about: dict[str, Any]) -> dict[str, Any]:
    """Start the namespace process of ``folder`` (its record returned once it listens)."""
    import cloudpickle  # Monarch's own dependency: on every worker

    _private_dirs(folder)
    sock = folder / SOCK
    with contextlib.suppress(FileNotFoundError):
        os.unlink(sock)
    owner = os.getppid()  # the host's worker: the namespace ends with it (%job kill)
    payload = cloudpickle.dumps((server.main, (str(sock), owner, _procfs.start_ticks(owner))))
    log = os.open(folder / "server.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        popen = subprocess.Popen(
            [sys.executable, "-c", BOOT],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=log,
            env=env,
            cwd=workdir,
            start_new_session=True,  # its own group: a run's stop or the actor's end never reaches it
        )
    finally:
        os.close(log)
    assert popen.stdin is not None
    with popen.stdin:
        popen.stdin.write(payload)
    record = {
        **about,
        "pid": popen.pid,
        "start_ticks": _procfs.start_ticks(popen.pid),
        "owner": owner,
        "started": time.time(),
        "host": socket.gethostname(),
    }
    _wait_listening(popen, sock, folder)
    fd = os.open(folder / RECORD, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, json.dumps(record).encode())
    finally:
        os.close(fd)
    _STARTED.append(popen)  # reaped when it ends (poll), never waited on
    return record


_STARTED: list[subprocess.Popen[bytes]] = []


def _wait_listening(popen: subprocess.Popen[bytes], sock: Path, folder: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            tail = (folder / "server.log").read_bytes()[-600:].decode(errors="replace").strip()
            raise NamespaceError(
                f"the session's process exited at start (rc {popen.returncode}): {tail or 'no output'}"
            )
        if sock.exists():
            with contextlib.suppress(OSError):
                ask(sock, {"op": "ping"}, 1.0)
                return
        time.sleep(0.005)
    popen.kill()
    raise NamespaceError(f"the session's process did not listen within {START_TIMEOUT:.0f} s")


def ensure(folder: Path, env: dict[str, str], workdir: str | None, about: dict[str, Any]) -> dict[str, Any]:
    """The live namespace process of ``folder``, started if there is none."""
    ended = {}
    for popen in list(_STARTED):
        if popen.poll() is not None:
            _STARTED.remove(popen)
            ended[popen.pid] = popen.returncode
    record = read_record(folder)
    if record is not None and alive(record):
        return record
    if record is not None:  # a namespace was here and is gone, its variables with it: never silently
        pid = record.get("pid")
        cause = _procfs.death_cause(int(pid or 0), ended.get(pid) if isinstance(pid, int) else None)
        about = {**about, "restarted": {"pid": pid, "at": time.time(), "cause": cause}}
    return start(folder, env, workdir, about)


def restarted_note(record: dict[str, Any]) -> str:
    """What every cell of a rank whose namespace was started anew says, until the session is
    restarted as a whole ('' for a namespace that never was)."""
    gone = record.get("restarted")
    if not isinstance(gone, dict):
        return ""
    at = time.strftime("%H:%M:%S", time.localtime(float(gone.get("at") or 0)))
    how = f"{gone.get('cause')}" if gone.get("cause") else "was gone"
    return (
        f"monarch_jupyter: this rank's namespace was started anew at {at} (its process, pid "
        f"{gone.get('pid')}, {how}): its variables from before are lost; "
        f"%remote session restart {record.get('name')} starts every rank anew\n"
    )


# ── what a host holds ─────────────────────────────────────────────────
def records(
    job: str, name: str | None, owner: int | None, root: Path | None = None
) -> list[tuple[Path, dict[str, Any]]]:
    """The namespaces of ``job`` on this machine (one ``name``, or all), those owned by
    ``owner`` (a host's worker pid) when given: ``(folder, record)``, dead ones included."""
    found: list[tuple[Path, dict[str, Any]]] = []
    try:
        base = sessions_root(root) / job_tag(job)
        names = [base / check_name(name)] if name else sorted(p for p in base.iterdir() if p.is_dir())
    except OSError:
        return []
    for named in names:
        try:
            folders = sorted(p for p in named.iterdir() if p.is_dir())
        except OSError:
            continue
        for folder in folders:
            record = read_record(folder)
            if record is None or (owner is not None and record.get("owner") != owner):
                continue
            found.append((folder, record))
    return found


def describe(folder: Path, record: dict[str, Any]) -> dict[str, Any]:
    """One namespace as ``%remote session ls`` shows it (a ping for busy and cells)."""
    row = {
        "name": record.get("name"),
        "key": record.get("key"),
        "rank": record.get("rank"),
        "point": record.get("point"),
        "pid": record.get("pid"),
        "host": record.get("host"),
        "started": record.get("started"),
        "alive": alive(record),
        "restarted": bool(record.get("restarted")),
        "busy": None,
        "cells": None,
    }
    if row["alive"]:
        with contextlib.suppress(Exception):
            answer = ask(folder / SOCK, {"op": "ping"}, 1.0)
            row["busy"], row["cells"] = answer.get("busy"), answer.get("cells")
    return row


async def stop(folder: Path, record: dict[str, Any], grace: float = _procfs.GRACE) -> bool:
    """End a namespace process (asked, then SIGTERM, then SIGKILL to its group) and remove its
    folder; whether it was alive."""
    was = alive(record)
    if was:
        with contextlib.suppress(Exception):
            await asyncio.to_thread(ask, folder / SOCK, {"op": "stop"}, 1.0)
        pid = int(record["pid"])

        def living() -> bool:
            return alive(record)

        if not await _procfs.wait_until_async(lambda: not living(), grace):
            await _procfs.escalate_async(
                lambda sig: _procfs.killpg(pid, sig), living, grace, (signal.SIGTERM, signal.SIGKILL)
            )
    shutil.rmtree(folder, ignore_errors=True)
    return was


# ── one cell ──────────────────────────────────────────────────────────
class SessionCell(RankOutput):
    """A cell running in a namespace process (see the module's docstring)."""

    def __init__(self, record: dict[str, Any], sock: Path, folder: Path, request: dict[str, Any]) -> None:
        super().__init__(folder)
        self.pid: int = int(record["pid"])
        self.name = str(record.get("name") or "")
        self.ticks = record.get("start_ticks")
        self.value: str | None = None
        self.error: str | None = None
        self._returncode: int | None = None
        self._answered = False
        self._done: asyncio.Future[int] | None = None
        self._stopping: asyncio.Future[None] | None = None
        try:
            self.conn = connect(sock)
        except BaseException:
            self.tail.close()
            raise
        try:
            server.send_message(self.conn, request)
        except BaseException:
            self.conn.close()
            self.tail.close()
            raise

    @property
    def returncode(self) -> int | None:
        return self._returncode

    def _read_answer(self) -> None:
        """The server's answer (it is small: read at once), or its absence when it died."""
        if self._answered:
            return
        self._answered = True
        try:
            answer = server.recv_message(self.conn)
        except (OSError, EOFError, ValueError):
            answer = {}
        self.conn.close()
        if answer.get("busy"):
            self._returncode, self.error = (
                1,
                (
                    "busy: an earlier cell still runs in this rank's namespace (Ctrl-C interrupts it; "
                    f"blocked in a collective, %remote session unblock {self.name} frees it, every variable kept)"
                ),
            )
        elif "rc" in answer:
            self._returncode, self.value, self.error = (
                int(answer["rc"]),
                answer.get("value"),
                answer.get("error"),
            )
        else:
            why = answer.get("error") or (
                "the namespace's process is gone" if not _procfs.alive(self.pid, self.ticks) else "no answer"
            )
            self._returncode, self.error = 1, f"{why} (pid {self.pid}): %remote session restart starts anew"

    def finish_now(self, limit: float, on_output: Callable[[], None] | None = None) -> int | None:
        """The return code if the cell ends within ``limit`` and its output fits one message."""
        deadline = time.monotonic() + limit
        printed = on_output is None
        while not self._answered:
            ready, _, _ = select.select([self.conn], [], [], SLICE)
            if ready:
                self._read_answer()
                break
            if not printed and self.tail.written():
                printed = True
                on_output()  # type: ignore[misc]
            if time.monotonic() > deadline:
                return None
        if self.tail.finish(LAST_BYTES):  # a flood: the rest in several messages
            return None
        self.tail.close()
        return self._returncode

    def _watch(self) -> None:
        if self._done is None:
            loop = asyncio.get_running_loop()
            self._done = loop.create_future()
            if self._answered:
                self._done.set_result(0)
            else:
                fd = self.conn.fileno()

                def ready() -> None:
                    loop.remove_reader(fd)
                    self._read_answer()
                    if not self._done.done():  # type: ignore[union-attr]
                        self._done.set_result(0)  # type: ignore[union-attr]

                loop.add_reader(fd, ready)
        self.tail.watch()

    async def finish(self) -> int | None:
        """Wait for the cell's end. Cancelled (the actor is going away), the cell goes on."""
        self._watch()
        assert self._done is not None
        try:
            await asyncio.shield(self._done)
        except BaseException:
            self.tail.close()
            raise
        return self._returncode

    async def stop(self, grace: float = _procfs.GRACE) -> None:
        """Ctrl-C: SIGINT to the namespace process, again every ``grace`` s, ``INTERRUPTS`` times."""
        if self._stopping is None:
            self._watch()
            self._stopping = asyncio.ensure_future(self._interrupt(grace))
        await asyncio.shield(self._stopping)

    async def _interrupt(self, grace: float) -> None:
        assert self._done is not None
        for _ in range(INTERRUPTS):
            if self._done.done() or not _procfs.kill(self.pid, signal.SIGINT):
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._done), grace)

    def kill(self) -> None:
        """Nothing: a namespace outlives its cells (``%remote session stop`` ends it)."""

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self._done is not None and not self._answered:
                asyncio.get_running_loop().remove_reader(self.conn.fileno())
        self.conn.close()
        self.tail.close()
