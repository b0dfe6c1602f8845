"""Runs in every proc spawned from the kernel: failing endpoint calls (and output) go to the kernel.

Monarch's ``call()`` raises one rank's ``ActorError`` and drops the others. Its
per-proc startup hook (``SetupActor.register_startup_function``) runs
:func:`install` on each new proc, which wraps the endpoint error path so that,
before the error goes back to the caller, a plain-data :func:`record` of it
(rank, exception chain, frames) goes to the kernel's error sink port.
"""

from __future__ import annotations

import contextlib
import linecache
import os
from types import TracebackType
from typing import Any

_WRAPPED = "_monarch_jupyter_wrapped"


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


# %%remote's own procs (remote/runner.py names them remote_<mesh>): their output is not the user's
_NOT_CAPTURED = ("remote_",)


def install(sink: Any, output: bool = True) -> None:
    """On this proc: failing endpoint calls also go to ``sink`` (a PortRef); with ``output``,
    so do fds 1 and 2 (see :mod:`.capture`). Runs inside Monarch's per-proc setup call."""
    from monarch._src.actor import actor_mesh

    _wrap_errors(actor_mesh, sink)
    if not output:
        return
    ctx = actor_mesh.context()
    proc = str(getattr(ctx.actor_instance, "proc_id", ""))
    if proc.startswith(_NOT_CAPTURED):
        return
    point = ctx.message_rank
    port = actor_mesh.Port(sink, ctx.actor_instance._as_rust(), None)
    port.return_undeliverable = False  # a kernel that went away must not fail the proc
    from . import capture

    capture.start(port.send, {"pid": os.getpid(), "point": [(name, point[name]) for name in point]})


def _wrap_errors(actor_mesh: Any, sink: Any) -> None:
    original = actor_mesh._Actor._report_exception
    if getattr(original, _WRAPPED, False):
        return

    def report(self: Any, e: Exception, ctx: Any, method_name: str, response_port: Any) -> None:
        with contextlib.suppress(Exception):  # telling the kernel must never change the call
            data = record(ctx.actor_instance.name, method_name, ctx.message_rank, e)
            port = actor_mesh.Port(sink, ctx.actor_instance._as_rust(), None)
            port.return_undeliverable = False
            port.send(data)
        original(self, e, ctx, method_name, response_port)

    setattr(report, _WRAPPED, True)
    actor_mesh._Actor._report_exception = report
