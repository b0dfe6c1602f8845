"""Runs in every proc spawned from the kernel: failing endpoint calls and output go to the kernel.

Monarch's per-proc startup hook (``SetupActor.register_startup_function``) runs
this module's *source* on each new proc (:func:`bootstrap`), so a worker needs
no monarch_jupyter, nor the kernel's version of it: the module is self-contained
(stdlib and Monarch only). :func:`install` then

- wraps the endpoint error path (Monarch's ``call()`` raises one rank's
  ``ActorError`` and drops the others) so that, before the error goes back to the
  caller, a plain-data :func:`record` of it (rank, exception chain, frames) goes
  to the kernel's port;
- tees fds 1 and 2 through pipes (:func:`capture`): a thread writes every byte on
  to where the fd went before (Monarch's own forwarding and logs see what they
  always saw) and sends the text, stamped with the wall-clock time it was read,
  to the kernel's port. That covers ``print``, ``logging`` (its handlers write to
  ``sys.stderr``) and native code alike; Monarch's proc bootstrap already makes
  ``sys.stdout`` line-buffered, so a print needs no flush.
"""

from __future__ import annotations

import bdb
import codecs
import contextlib
import functools
import inspect
import linecache
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

_WRAPPED = "_monarch_jupyter_wrapped"
_CAPTURED = "_monarch_jupyter_captured"  # set on sys once this process's fds are teed


def frames(tb: TracebackType | None) -> list[tuple[str, int, str, str, str]]:
    """(filename, line, name, qualified name, source line) of each frame, outermost first."""
    out = []
    while tb is not None:
        code = tb.tb_frame.f_code
        lineno = tb.tb_lineno
        line = linecache.getline(code.co_filename, lineno) if not code.co_filename.startswith("<") else ""
        out.append((code.co_filename, lineno, code.co_name, getattr(code, "co_qualname", code.co_name), line))
        tb = tb.tb_next
    return out


def chain(error: BaseException) -> list[dict[str, Any]]:
    """The exception and what led to it, oldest first, as Python prints them."""
    seen: list[tuple[BaseException, str]] = []
    current: BaseException | None = error
    relation = ""
    while current is not None and all(current is not e for e, _ in seen) and len(seen) < 10:
        seen.append((current, relation))
        if current.__cause__ is not None:
            current, relation = current.__cause__, "cause"
        elif current.__context__ is not None and not current.__suppress_context__:
            current, relation = current.__context__, "context"
        else:
            current = None
    # ``relation`` (how the newer exception links to this one) is printed after this one
    return [
        {
            "type": _type_name(exc),
            "message": str(exc),
            "frames": frames(exc.__traceback__),
            "relation": relation,
        }
        for exc, relation in reversed(seen)
    ]


def _type_name(exc: BaseException) -> str:
    kind = type(exc)
    return (
        kind.__qualname__
        if kind.__module__ in ("builtins", "__main__")
        else f"{kind.__module__}.{kind.__qualname__}"
    )


def record(mesh: str, method: str, point: Any, error: BaseException) -> dict[str, Any]:
    """What the kernel needs to show one rank's failure, in plain picklable data."""
    names = list(point)
    size = 1
    for name in names:
        size *= point.size(name)
    return {
        "kind": "failure",
        "mesh": mesh,
        "method": method,
        "point": [(name, point[name]) for name in names],
        "size": size,
        "chain": chain(error),
        "pid": os.getpid(),
    }


_PROC_POINT: list[tuple[str, int]] = []  # this proc's point in its proc mesh (set by _install)


def proc_point(called: list[tuple[str, int]], proc: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """A failing rank's label: the proc's own point when the call's (a sliced mesh's: fewer dims,
    renumbered) names only some of its dims, so two hosts' ``gpus=0`` stay two ranks."""
    names = {name for name, _ in called}
    return list(proc) if proc and names < {name for name, _ in proc} else called


# %%remote's own procs (remote/run/runner.py names them remote_<mesh>): their output is not the user's
_NOT_CAPTURED = ("remote_",)


def install(sink: Any, output: bool = True, spawn: int = 0, kernel: int = 0) -> None:
    """On this proc: failing endpoint calls also go to ``sink`` (a PortRef); with ``output``,
    so do fds 1 and 2 (:func:`capture`); the proc announces itself (:func:`announce`, of the
    kernel's ``spawn``-th proc mesh). ``kernel``: the kernel's pid (a ``this_host()`` proc is its
    child, whose fds 1 and 2 Monarch pipes into the kernel's own: its bytes are not also written
    there, where the kernel would show them a second time, unlabelled). Runs inside Monarch's per-proc setup
    call, which must not fail because of it: a Monarch this does not know gets one line on
    stderr instead."""
    try:
        _install(sink, output, spawn, kernel)
    except Exception as error:
        print(
            f"monarch_jupyter: this proc's actor errors/output are not forwarded: {error!r}", file=sys.stderr
        )


def _start_ticks() -> int | None:
    try:
        with open("/proc/self/stat") as f:
            return int(f.read().rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def announce(actor_mesh: Any, sink: Any, spawn: int, output: bool = True) -> None:
    """Tell the kernel this proc exists: its pid (and start tick: a reused pid is not it), host,
    proc name and point, so ``%remote stacks --actors`` can find it while an endpoint hangs."""
    ctx = actor_mesh.context()
    point = ctx.message_rank
    data = {
        "kind": "proc",
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "start": _start_ticks(),
        "host": socket.gethostname(),
        "proc": str(getattr(ctx.actor_instance, "proc_id", "")),
        "spawn": spawn,
        "output": output,
        "rank": int(point.rank),
        "point": [(name, point[name]) for name in point],
        "time": time.time(),
    }
    _send(actor_mesh, sink, data)


def _qualname_at(lineno: int) -> str | None:
    """The qualified name of the innermost pickled-by-value frame on this stack at ``lineno``."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_filename == DYNAMIC and frame.f_lineno == lineno:
            return getattr(code, "co_qualname", code.co_name)
        frame = frame.f_back  # type: ignore[assignment]
    return None


DYNAMIC = "<dynamic-code>"  # cloudpickle's co_filename for notebook code


def _wrap_warnings() -> None:
    """A warning raised in notebook code says ``<dynamic-code Worker.step>:17:`` instead of
    ``<dynamic-code>:17:``: the kernel turns that into ``cell [N] line 17:`` (:func:`.kernel`)."""
    import warnings

    original = warnings.formatwarning
    if getattr(original, _WRAPPED, False):
        return

    def formatwarning(
        message: Any, category: Any, filename: str, lineno: int, line: str | None = None
    ) -> str:
        if filename == DYNAMIC:
            with contextlib.suppress(Exception):
                qualname = _qualname_at(lineno)
                if qualname:
                    filename = f"<dynamic-code {qualname}>"
        return original(message, category, filename, lineno, line)

    setattr(formatwarning, _WRAPPED, True)
    warnings.formatwarning = formatwarning


def _install(sink: Any, output: bool, spawn: int = 0, kernel: int = 0) -> None:
    from monarch._src.actor import actor_mesh

    _wrap_warnings()
    _wrap_errors(actor_mesh, sink)
    _wrap_breakpoints(actor_mesh, sink)
    ctx = actor_mesh.context()
    _PROC_POINT[:] = [(name, ctx.message_rank[name]) for name in ctx.message_rank]
    proc = str(getattr(ctx.actor_instance, "proc_id", ""))
    if proc.startswith(_NOT_CAPTURED):
        return
    announce(actor_mesh, sink, spawn, output)
    if not output:
        return
    point = ctx.message_rank
    port = actor_mesh.Port(sink, ctx.actor_instance._as_rust(), None)
    port.return_undeliverable = False  # a kernel that went away must not fail the proc
    who = {"pid": os.getpid(), "point": [(name, point[name]) for name in point], "spawn": spawn}
    capture(port.send, who, passthrough=os.getppid() != kernel)


def _wrap_errors(actor_mesh: Any, sink: Any) -> None:
    original = actor_mesh._Actor._report_exception
    if getattr(original, _WRAPPED, False):
        return

    def report(self: Any, e: Exception, ctx: Any, method_name: str, response_port: Any) -> None:
        with contextlib.suppress(Exception):  # telling the kernel must never change the call
            data = record(ctx.actor_instance.name, method_name, ctx.message_rank, e)
            data["point"] = proc_point(data["point"], _PROC_POINT)
            port = actor_mesh.Port(sink, ctx.actor_instance._as_rust(), None)
            port.return_undeliverable = False
            port.send(data)
        original(self, e, ctx, method_name, response_port)

    setattr(report, _WRAPPED, True)
    actor_mesh._Actor._report_exception = report


def _send(actor_mesh: Any, sink: Any, data: dict[str, Any]) -> None:
    with contextlib.suppress(Exception):  # telling the kernel must never change the call
        port = actor_mesh.Port(sink, actor_mesh.context().actor_instance._as_rust(), None)
        port.return_undeliverable = False
        port.send(data)


def _wrap_breakpoints(actor_mesh: Any, sink: Any) -> None:
    """``breakpoint()`` and ``pdb.set_trace()`` tell the kernel which rank stopped where, then
    enter Monarch's remote pdb (its ``remote_breakpointhook``, inlined: it traces its caller's
    frame, so it cannot be wrapped); the end of the session tells the kernel too."""
    import pdb

    from monarch._src.actor.debugger.debug_controller import debug_controller
    from monarch._src.actor.debugger.pdb_wrapper import PdbWrapper

    if getattr(PdbWrapper.end_debug_session, _WRAPPED, False):
        return

    def who() -> dict[str, Any]:
        ctx = actor_mesh.context()
        point = ctx.message_rank
        return {
            "actor": ctx.actor_instance.actor_id.actor_name,
            "rank": point.rank,
            "point": proc_point([(name, point[name]) for name in point], _PROC_POINT),
            "pid": os.getpid(),
        }

    def stop_here(frame: Any, header: str | None = None) -> None:
        ctx = actor_mesh.context()
        rank = ctx.message_rank
        code = frame.f_code
        where = (code.co_filename, frame.f_lineno, code.co_name, getattr(code, "co_qualname", code.co_name))
        _send(actor_mesh, sink, {"kind": "stopped", "frame": where, "time": time.time(), **who()})
        wrapper = PdbWrapper(
            rank.rank, {k: rank[k] for k in rank}, ctx.actor_instance.actor_id, debug_controller(), header
        )
        actor_mesh.DebugContext.set(actor_mesh.DebugContext(wrapper))
        wrapper.set_trace(frame)

    def hook(*_: Any, **__: Any) -> None:
        stop_here(sys._getframe(1))

    def set_trace(*, header: str | None = None) -> None:
        stop_here(sys._getframe(1), header)

    original_post_mortem = PdbWrapper.post_mortem

    def post_mortem(self: Any, exc_tb: Any) -> None:
        # Monarch's _post_mortem_debug: a rank that was at a breakpoint in this call and then
        # raised stops again, on the raising frame; the kernel prompts for it like a breakpoint.
        # pdb's own quit (BdbQuit, `q` at a breakpoint) is no error to debug: it ends there.
        if isinstance(sys.exc_info()[1], bdb.BdbQuit):
            return
        innermost = exc_tb
        while innermost is not None and innermost.tb_next is not None:
            innermost = innermost.tb_next
        if innermost is not None:
            code = innermost.tb_frame.f_code
            where = (
                code.co_filename,
                innermost.tb_lineno,
                code.co_name,
                getattr(code, "co_qualname", code.co_name),
            )
            error = sys.exc_info()[1]
            said = f"{_type_name(error)}: {error}" if error is not None else "an error"
            _send(
                actor_mesh,
                sink,
                {"kind": "stopped", "frame": where, "error": said, "time": time.time(), **who()},
            )
        original_post_mortem(self, exc_tb)

    original_end = PdbWrapper.end_debug_session

    def end_debug_session(self: Any) -> None:
        _send(actor_mesh, sink, {"kind": "resumed", "time": time.time(), **who()})
        original_end(self)

    setattr(end_debug_session, _WRAPPED, True)
    PdbWrapper.end_debug_session = end_debug_session
    PdbWrapper.post_mortem = post_mortem
    sys.breakpointhook = hook
    pdb.set_trace = set_trace


def _pump(read_fd: int, out_fd: int | None, stream: str, send: Callable[[dict], None], who: dict) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    while True:
        try:
            data = os.read(read_fd, 65536)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return
        stamp = time.time()
        with contextlib.suppress(OSError):
            view = memoryview(data)
            while view and out_fd is not None:
                view = view[os.write(out_fd, view) :]
        text = decoder.decode(data)
        if text:
            with contextlib.suppress(Exception):  # the kernel going away must not stop the proc
                send({"kind": "output", "stream": stream, "text": text, "time": stamp, **who})


def capture(send: Callable[[dict], None], who: dict[str, Any], passthrough: bool = True) -> None:
    """Tee fds 1 and 2 of this process to ``send`` (once per process); without ``passthrough``
    only send them."""
    if getattr(sys, _CAPTURED, False):
        return
    setattr(sys, _CAPTURED, True)
    for fd, stream in ((1, "out"), (2, "err")):
        with contextlib.suppress(OSError, ValueError):
            (sys.stdout if fd == 1 else sys.stderr).flush()
        saved = os.dup(fd) if passthrough else None
        read_fd, write_fd = os.pipe()
        os.dup2(write_fd, fd)
        os.close(write_fd)
        thread = threading.Thread(target=_pump, args=(read_fd, saved, stream, send, who), daemon=True)
        thread.name = f"monarch-jupyter-{stream}"
        thread.start()


def bootstrap(sink: Any, output: bool, spawn: int = 0) -> Callable[[], None]:
    """What Monarch runs on each new proc: this module's source, then :func:`install`."""
    source = inspect.getsource(sys.modules[__name__]) + "\ninstall(SINK, OUTPUT, SPAWN, KERNEL)\n"
    names = {
        "__name__": "monarch_jupyter_actor_worker",
        "SINK": sink,
        "OUTPUT": output,
        "SPAWN": spawn,
        "KERNEL": os.getpid(),
    }
    return functools.partial(exec, source, names)
