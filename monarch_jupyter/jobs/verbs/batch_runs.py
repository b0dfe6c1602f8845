"""``%job batch`` and ``%job logs``: client scripts detached in run folders of their own."""

from __future__ import annotations

import os
from pathlib import Path

from .registry import Cell, arg, given, verb


def _context_dir(cell: Cell) -> Path:
    return cell.session.layout.dir / cell.session.context


@verb(
    "batch",
    "run a client script detached in its own folder, as Monarch's batch mode does",
    arg("script", metavar="SCRIPT"),
    arg("spec", nargs="?", metavar="SPEC", help="a module.attr SlurmJob (default: this machine)"),
)
def start(cell: Cell, script: str | None = None, spec: str | None = None) -> None:
    from .. import batch

    run = batch.start(_context_dir(cell), given(script, "batch"), cell.session.root, spec)
    where = f"Slurm job {run.slurm_job_id}" if run.slurm_job_id else f"pid {run.pid}"
    print(
        f"batch run {run.id} started: {script} ({where}); "
        f"%job logs {run.id} --follow streams {os.path.relpath(run.log, cell.session.root)}"
    )


@verb(
    "logs",
    "print a batch run's output (--follow: live; Ctrl-C stops following only)",
    arg("name", metavar="ID"),
    arg("-f", "--follow", action="store_true", help="stream new output until the run ends"),
)
def logs(cell: Cell, name: str | None = None, follow: bool = False) -> None:
    from .. import batch

    run_id = given(name, "logs")
    if not follow:
        run = batch.load(_context_dir(cell), run_id)
        size = run.log.stat().st_size if run.log.exists() else 0
        text, _ = batch.read_log(run, max(0, size - batch.TAIL_BYTES))
        print(text, end="")
        print(f"[batch run {run.id}: {run.state}]")
        return
    try:
        for text in batch.follow(_context_dir(cell), run_id):
            print(text, end="", flush=True)
    except KeyboardInterrupt:
        print(f"\n[stopped following {run_id}; the script keeps running: %job kill {run_id} stops it]")
        return
    print(f"[batch run {run_id}: {batch.load(_context_dir(cell), run_id).state}]")
