"""``%job status``, ``%job apply``, ``%job kill``: the job's life."""

from __future__ import annotations

from collections.abc import Callable

from ...errors import Interrupted
from .registry import Cell, arg, say, verb

CONTEXT = "another context (default: the active one)"

#: The forms of ``%job apply SPEC`` (parsed by :func:`..specs.parse.parse_apply`).
APPLY_FORMS = (
    ("--local MESH=N[,MESH=N...]", "start a local job: one worker process per host"),
    ("--local MESH=N --telemetry | --admin", "the same with Monarch's telemetry store (and mesh admin)"),
    (
        "--local MESH=N --mount SRC[:DST] --gather REMOTE:LOCAL",
        "the same with folder SRC on every worker (FUSE), every worker's REMOTE read-only at LOCAL",
    ),
    (
        "--ssh MESH=H1,H2 [--python PATH] [--port N] [--config FILE]",
        "start an SSHJob on hosts of your ssh config (they need torchmonarch of this version)",
    ),
    ("module.attr", "apply a JobTrait importable from the notebook's folder"),
    ("NAME", "apply the JobTrait held by notebook variable NAME"),
    ("", "re-apply the context's saved spec"),
)


def listing(synopsis: str, summary: str) -> str:
    """One line of ``%job?``: the synopsis, then the summary in a column (or under a long one)."""
    if len(synopsis) >= 32:
        return f"{synopsis}\n{'':<32} {summary}"
    return f"{synopsis:<32} {summary}"


@verb(
    "status",
    "show the job: class, apply id, state, meshes, URLs",
    arg("context", nargs="?", metavar="CONTEXT", help=CONTEXT),
)
def status(cell: Cell, context: str | None = None) -> None:
    from .. import batch, formatting

    shown = cell.session.status(context)
    if not cell.hooks.show_status(cell.session, shown):
        cell.display(formatting.StatusView(shown))
    context_dir = cell.session.layout.dir / shown.context
    runs = batch.runs(context_dir) if context_dir.is_dir() else []
    if runs:
        print(batch.lines(runs))
    if not context:
        say(cell.hooks.runs_note(cell.session))


@verb(
    "apply",
    "start the job of a spec (nothing, if the running job can already run it)",
    arg("spec", nargs="*", metavar="SPEC", help="--local MESH=N[,...], module.attr or NAME"),
    description="\n".join(listing(f"%job apply {form}".strip(), text) for form, text in APPLY_FORMS),
)
def apply(cell: Cell, spec_text: str = "") -> None:
    from .. import formatting
    from ..specs.parse import parse_apply

    try:
        spec = parse_apply(spec_text, str(cell.session.root))
        result = cell.session.apply(spec, namespace=cell.user_ns)
    except Interrupted:
        raise
    except KeyboardInterrupt:
        raise Interrupted(
            "%job apply interrupted: the workers it started are being stopped; "
            "%job shows which job the context has now"
        ) from None
    print(formatting.apply_line(result))


@verb(
    "kill",
    "reap the workers and remove the state file (or stop batch run ID)",
    arg("context", nargs="?", metavar="CONTEXT", help=f"{CONTEXT}, or a batch run ID"),
)
def kill(cell: Cell, context: str | None = None) -> None:
    from .. import batch, formatting

    if context and batch.is_id(context):  # a batch run: see batch.py
        run = batch.kill(cell.session.layout.dir / cell.session.context, context)
        print(f"batch run {run.id}: {run.state}")
        return
    killed = cell.session.kill(context, before=_stop_runs(cell, context))
    print(formatting.kill_line(killed))
    if "admin" in killed.services and killed.attached:
        print(
            "the mesh admin's loopback port stays open in this kernel until it restarts "
            "(Monarch 0.7 cannot stop it)"
        )


def _stop_runs(cell: Cell, context: str | None) -> Callable[[], None] | None:
    """What stops the context's runs before its job is killed, not left running unseen."""
    if context and context != cell.session.context:
        return None

    def stop() -> None:
        say(cell.hooks.stop_runs(cell.session))

    return stop
