"""The kernel's side of the user's actors: every rank's errors, and their output in the cell.

:func:`enable` (called when the extension hands out the job's host meshes) opens a
port the procs report to (see :mod:`.worker`) and asks Monarch to set that up on
every proc spawned from now on. Failure records back an IPython handler for
``ActorError`` that shows :func:`.failures.render` instead of Monarch's text (the
``ActorError`` itself still propagates: code that catches it is unchanged, and
:func:`failure` gives its per-rank view); output chunks go to :mod:`.output`.
:func:`live_output` turns output forwarding off or on for procs spawned later.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from ..jobs import breakpoints as stopped
from ..runtime import faults as _faults
from ..runtime import introspect as _introspect
from ..system import actor_procs, procfs
from ..system.files import private_dir
from ..text import timefmt as _timefmt
from . import cells, fault_text, worker
from .debugger import Debugger, loopback_only
from .failures import DYNAMIC, CallFailure, Frame, from_record, render, strip_ansi
from .output import Forwarder, Log, kernel_publisher
from .proc_watch import Watch

SETTLE = 0.05  # a record arriving within this of the previous one belongs to the same burst
SETTLE_MAX = 0.3  # the longest the handler waits for other ranks' records after the error
_CALL = re.compile(r"Actor call (?P<mesh>.+)\.(?P<method>[^.\s]+) failed")
_ATTR = "_monarch_jupyter_failure"
_WARNED_AT = re.compile(r"<dynamic-code (?P<qualname>[^>\s]+)>:(?P<line>\d+):")
_NOTED = "_monarch_jupyter_noted"  # on our ProcMesh.stop wrapper: installed once


class Inbox:
    """A port in the kernel that procs send records to, read by a daemon thread: output chunks go
    to ``on_output``, failure records are kept for :meth:`take`."""

    def __init__(self, on_output: Callable[[dict], None]) -> None:
        self.ref, receiver = _introspect.open_kernel_port()
        self.on_output = on_output
        self.on_debug: Callable[[dict], None] | None = None  # stopped / resumed records
        self.spawns = 0  # proc meshes spawned so far: each proc's record says which one
        self.named: dict[int, str] = {}  # spawn → its mesh's name, where labels need it (shared_shapes)
        self._cond = threading.Condition()
        self._records: list[tuple[float, dict]] = []  # (monotonic arrival, record)
        threading.Thread(
            target=self._loop, args=(receiver,), name="monarch-jupyter-inbox", daemon=True
        ).start()

    def _loop(self, receiver: Any) -> None:
        failures = 0
        while failures < 10:  # a closed receiver fails every recv: stop instead of spinning
            try:
                data = receiver.recv().get()
            except Exception:
                failures += 1
                time.sleep(0.1)
                continue
            failures = 0
            if not isinstance(data, dict):
                continue
            if data.get("kind") == "output":
                mesh = self.named.get(data.get("spawn"))  # type: ignore[arg-type]
                self.on_output({**data, "mesh": mesh} if mesh else data)
                continue
            if data.get("kind") == "proc":
                actor_procs.add(data)
                with contextlib.suppress(Exception):
                    self.named = actor_procs.shared_shapes([p for p in actor_procs.known() if _live(p)])
                continue
            if data.get("kind") in ("stopped", "resumed"):
                with contextlib.suppress(Exception):  # a bad record must not stop the inbox
                    if self.on_debug is not None:
                        self.on_debug(data)
                continue
            if data.get("kind") == "failure":
                with self._cond:
                    self._records.append((time.monotonic(), data))
                    self._cond.notify_all()

    def take(self, mesh: str, method: str, since: float) -> list[dict]:
        """Remove and return the records of ``mesh.method`` that arrived after ``since``, first
        waiting for a burst still arriving to end."""
        deadline = time.monotonic() + SETTLE_MAX
        with self._cond:
            while True:
                mine = [
                    r for t, r in self._records if t >= since and (r["mesh"], r["method"]) == (mesh, method)
                ]
                last = max((t for t, _ in self._records), default=0.0)
                now = time.monotonic()
                if (mine and now - last >= SETTLE) or now >= deadline:
                    break
                self._cond.wait(min(SETTLE, max(0.0, deadline - now)))
            self._records = [
                (t, r) for t, r in self._records if t >= since and (r["mesh"], r["method"]) != (mesh, method)
            ]
        return mine

    def forget_before(self, since: float) -> None:
        with self._cond:
            self._records = [(t, r) for t, r in self._records if t >= since]

    def startup(self) -> Callable[[], None] | None:
        """Monarch's per-proc startup function, called in the kernel at each spawn: what each new
        proc runs (see :func:`.worker.bootstrap`); None (nothing) rather than a failed spawn."""
        self.spawns += 1
        try:
            return worker.bootstrap(self.ref, _live_output, self.spawns)
        except Exception:  # e.g. no source to send (an install without .py files)
            return None


_HOST = socket.gethostname()


def _live(proc: actor_procs.Proc) -> bool:
    """A proc on another host is taken as live (its host's Monarch says otherwise)."""
    return proc["host"] != _HOST or procfs.alive(proc["pid"], proc["start"])


class _Kernel:
    def __init__(self, shell: Any, session: Any) -> None:
        self.shell = shell
        log, shown = _open_log(session)
        self.output = Forwarder(kernel_publisher(shell), log, shown)
        self.inbox = Inbox(lambda data: self.output.feed(self.translated(data)))
        self.cell_started = time.monotonic()
        self.parent: dict = dict(getattr(shell, "parent_header", {}) or {})
        self.output.cell(time.time(), self.parent)
        self.session = session
        self.running = True  # between pre_run_cell and post_run_cell (enable() runs in a cell)
        self.debugger: Debugger | None = None
        self.start_debugger()
        self.publish = kernel_publisher(shell)
        self.faults_lock = threading.Lock()
        self.late_faults: list[str] = []  # said at the start of the next cell
        self.watch = Watch(self.fault, lambda: self.cell_number if self.running else None)
        self.cell_number: int | None = getattr(shell, "execution_count", None)

    def fault(self, line: str) -> None:
        """A proc died (from the watch's thread): said in the running cell now, else at the
        start of the next one."""
        with self.faults_lock:
            if not self.running:
                self.late_faults.append(line)
                return
            parent = self.parent
        self.publish(parent, line + "\n")

    def start_debugger(self) -> None:
        """The cell debugger (its signal handler needs the main thread: retried at each cell)."""
        if self.debugger is not None:
            return
        with contextlib.suppress(ValueError, OSError):  # ValueError: not the main thread
            loopback_only()
            publish = kernel_publisher(self.shell)
            self.debugger = Debugger(
                self.locate,
                self.cell_source,
                stopped.folder_of(self.session),
                lambda text: publish(self.parent, text),
                lambda: self.running,
            )
            self.inbox.on_debug = self.debugger.record
            if self.running:
                self.debugger.cell_started(getattr(self.shell, "execution_count", None))

    def pre_run_cell(self, *_: Any) -> None:
        self.start_debugger()
        self.cell_number = getattr(self.shell, "execution_count", None)
        if self.debugger is not None:
            self.debugger.cell_started(self.cell_number)
        with self.faults_lock:
            late, self.late_faults = self.late_faults, []
            self.running = True
        for line in late:
            print(line, flush=True)
        self.cell_started = time.monotonic()
        self.inbox.forget_before(self.cell_started)
        self.parent = dict(getattr(self.shell, "parent_header", {}) or {})
        self.output.cell(time.time(), self.parent)

    def post_run_cell(self, result: Any = None, *_: Any) -> None:
        with self.faults_lock:
            self.running = False
        if self.debugger is not None:
            stopped_by_user = isinstance(getattr(result, "error_in_exec", None), KeyboardInterrupt)
            with contextlib.suppress(Exception):  # freeing ranks must never fail the cell's end
                self.debugger.cell_ended(interrupted=stopped_by_user)
        self.output.settle()

    def failure(self, error: BaseException) -> CallFailure:
        cached = getattr(error, _ATTR, None)
        if isinstance(cached, CallFailure):
            return cached
        match = _CALL.search(getattr(error, "message", "") or "")
        mesh, method = (match["mesh"], match["method"]) if match else ("actor", "call")
        # one record a rank, its latest: calls of mesh.method that failed earlier in this cell and
        # were caught (and not asked about) left theirs too
        latest = {tuple(map(tuple, r["point"])): r for r in self.inbox.take(mesh, method, self.cell_started)}
        records = list(latest.values())
        result = CallFailure(mesh, method, [from_record(r) for r in records])
        result.size = max((int(r.get("size", 0)) for r in records), default=0)
        result.ranks.sort(key=lambda r: tuple(v for _, v in r.point))
        result.original = error
        with contextlib.suppress(Exception):
            setattr(error, _ATTR, result)
        return result

    def translated(self, data: dict) -> dict:
        """An output chunk with ``<dynamic-code Q.f>:17:`` (a warning in notebook code, see
        :func:`.worker._wrap_warnings`) as ``cell [N] line 17:``."""
        text = data.get("text")
        if not isinstance(text, str) or "<dynamic-code " not in text:
            return data

        def cell_of(match: re.Match[str]) -> str:
            found = self.locate_named(match["qualname"], int(match["line"]))
            return f"cell [{found[0]}] line {match['line']}:" if found else match[0]

        return {**data, "text": _WARNED_AT.sub(cell_of, text)}

    def locate(self, frame: Frame) -> tuple[int, str] | None:
        return cells.find(cells.kernel_cells(self.shell), frame)

    def locate_named(self, qualname: str, line: int) -> tuple[int, str] | None:
        """A py-spy frame (qualified name, line) of notebook code: its cell and source line."""
        return self.locate(Frame(DYNAMIC, line, qualname.rpartition(".")[2], qualname))

    def cell_source(self, number: int) -> str | None:
        return dict(cells.kernel_cells(self.shell)).get(number)

    def called_from(self, tb: TracebackType | None) -> list[str]:
        """``called from cell [6] line 1: a.boom.call(1).get()`` for the cell frames of ``tb``."""
        names = getattr(self.shell.compile, "_filename_map", {})
        out = []
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_filename in names:
                line = linecache.getline(code.co_filename, tb.tb_lineno).strip()
                out.append(f"  called from cell [{names[code.co_filename]}] line {tb.tb_lineno}: {line}")
            tb = tb.tb_next
        return out

    def text(self, error: BaseException, tb: TracebackType | None) -> str:
        if _is_supervision(error):  # a proc died under the call: one line, like an actor error's head
            return (
                "\n".join([fault_text.call_line(fault_text.parse(str(error))), *self.called_from(tb)]) + "\n"
            )
        failure = self.failure(error)
        if failure.ranks:
            return render(failure, self.locate, self.called_from(tb))
        # a proc spawned before enable() (or a failure outside an endpoint): Monarch's own text
        head = f"{failure.mesh}.{failure.method}() failed (which ranks: not known)"
        body = strip_ansi(getattr(error, "exception_formatted", "") or str(error))
        return "\n".join([head, *self.called_from(tb), "", body.rstrip()]) + "\n"

    def handler(
        self, shell: Any, etype: type, value: BaseException, tb: TracebackType | None, tb_offset: Any = None
    ) -> list[str]:
        """IPython's custom-exception hook: it ignores the return value, so this shows the error
        itself (``_showtraceback``: ipykernel sends it as the cell's ``error`` message)."""
        shown: object = value
        try:
            lines = self.text(value, tb).rstrip("\n").split("\n")
            stb = [f"{etype.__name__}: {lines[0]}", *lines[1:]]
            shown = lines[0]  # the error message's evalue: the one-sentence headline
        except Exception:  # never lose the error itself to a bug in showing it
            stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
        sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb  # %debug, %tb still work
        shell._showtraceback(etype, shown, stb)  # noqa: SLF001 (ipykernel's hook that sends the error; pinned)
        return stb


KEEP_LOGS = 20  # actor output logs kept per context (one per kernel that used actors)


def _open_log(session: Any) -> tuple[Log | None, str | None]:
    """This kernel's actor output log, ``.monarch/<context>/actors/<utc>-<pid>.log`` of
    ``session``'s context (a JobContext), and its path as shown (relative to the notebook's
    folder); (None, None) when it cannot be made."""
    try:
        # imported here, on the first spawn, for start-up cost (the runner pulls in all of remote/)
        from ..remote.run.runner import prune_logs

        folder = private_dir(session.layout.context_dir(session.context) / "actors")
        prune_logs(str(folder), KEEP_LOGS - 1)
        stamp = _timefmt.utc_stamp()
        log = Log(str(folder / f"{stamp}-{os.getpid()}.log"))
        return log, os.path.relpath(log.path, session.root)
    except (OSError, ValueError, AttributeError):
        return None, None


_kernel: _Kernel | None = None
_lock = threading.Lock()
_live_output = True  # whether procs spawned from now on forward their output (live_output)


def enable(session: Any, shell: Any = None) -> None:
    """Start collecting every rank's errors (and output, into ``session``'s context's log) for
    procs spawned from now on (idempotent). ``session``: the JobContext."""
    global _kernel
    with _lock:
        if _kernel is not None:
            return
        from monarch.actor import ActorError

        if shell is None:
            from IPython import get_ipython

            shell = get_ipython()
        if shell is None:
            return
        from ..runtime.chatter import start_client_context

        start_client_context()  # Monarch's "internal logs are being written" banner never in a cell
        kernel = _Kernel(shell, session)
        _note_stops()
        _introspect.register_proc_startup(kernel.inbox.startup)
        actor_procs.set_locator(kernel.locate_named)
        shell.set_custom_exc((ActorError, _introspect.supervision_error_class()), kernel.handler)
        shell.events.register("pre_run_cell", kernel.pre_run_cell)
        shell.events.register("post_run_cell", kernel.post_run_cell)
        _kernel = kernel


def _is_supervision(error: BaseException) -> bool:
    return isinstance(error, _introspect.supervision_error_class())


def _note_stops() -> None:
    """``ProcMesh.stop()`` and ``JobTrait.kill()`` (Monarch's public API) say first that the ends
    that follow are on purpose (``runtime/faults.expect_ends``): no fault to announce."""
    from monarch.actor import ProcMesh
    from monarch.job import JobTrait

    for owner, name in ((ProcMesh, "stop"), (JobTrait, "kill")):
        original = getattr(owner, name)
        if getattr(original, _NOTED, False):
            continue
        setattr(owner, name, _expecting_ends(original))


def _expecting_ends(original: Callable[..., Any]) -> Callable[..., Any]:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        _faults.expect_ends()
        return original(self, *args, **kwargs)

    setattr(call, _NOTED, True)
    return call


def live_output(enabled: bool) -> None:
    """Whether procs spawned from now on forward their stdout/stderr to the cell (on by default).

    Per mesh: ``live_output(False)`` before its ``spawn_procs()``, ``live_output(True)`` after."""
    global _live_output
    _live_output = bool(enabled)


def log_path() -> str | None:
    """The file every line of this kernel's actors goes to (None before :func:`enable`)."""
    log = _kernel.output.log if _kernel is not None else None
    return log.path if log is not None else None


def failure(error: BaseException) -> CallFailure | None:
    """Every failing rank of the call that raised ``error`` (an ``ActorError``), or None when
    errors are not being collected."""
    return _kernel.failure(error) if _kernel is not None else None
