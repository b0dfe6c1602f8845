"""The ``%job`` line magic: a thin shell over :class:`~monarch_jupyter.jobs.session.JobSession`.

Parsing and help come from :mod:`.job_args`; every failure a user can act on is
one ``UsageError`` line.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

from ..errors import Interrupted, MonarchJupyterError
from . import args as job_args
from . import batch, formatting
from .session import JobSession
from .status import RUNNING, JobStatus

_JOB_DOC = """Manage the Monarch job of the current context (mirrors the `monarch` CLI).

{commands}

Applying when the running job can already run the spec does nothing.
State lives in .monarch/ of the current folder, shared with `monarch`:
a job applied here or by `monarch apply` survives kernel restarts.
`%job COMMAND -h` shows one command's arguments.
From Python: monarch_jupyter.job() and monarch_jupyter.state().
"""


def full_doc() -> str:
    """What ``%job?`` shows: every subcommand, from the parsers that parse them."""
    return _JOB_DOC.format(commands=job_args.help_text())


def _no_view(session: JobSession, status: JobStatus) -> bool:
    return False


def _no_runs(session: JobSession) -> str | None:
    return None


@dataclass(frozen=True)
class JobHooks:
    """What the composition root (``extension/load.py``) plugs into ``%job``: the live view and
    ``%%remote``'s runs, which the job side does not import (they import it)."""

    #: displays a live view of ``status`` and returns True, or returns False (text is shown then)
    show_status: Callable[[JobSession, JobStatus], bool] = _no_view
    #: stops the context's runs before its job is killed; the line to print about them, if any
    stop_runs: Callable[[JobSession], str | None] = _no_runs
    #: one line about the context's runs still running, if any
    runs_note: Callable[[JobSession], str | None] = _no_runs


@magics_class
class JobMagics(Magics):
    def __init__(self, shell, session: JobSession, hooks: JobHooks | None = None) -> None:
        super().__init__(shell)
        self.session = session
        self.hooks = hooks or JobHooks()
        self._topology: Any = None  # the last %job topology sample: the next one is judged against it

    @line_magic
    def job(self, line: str) -> Any:
        try:
            command = job_args.parse(line)
        except job_args.HelpRequested as request:
            print(request.text)
            return
        except job_args.ArgumentsError as error:
            raise UsageError(str(error)) from None
        handler = getattr(self, "_do_" + command.command.replace(" ", "_"))
        try:
            return handler(command)
        except MonarchJupyterError as error:
            raise UsageError(f"%job {command.command}: {error}") from None

    # %job? asks IPython's inspector, which calls getdoc(): the listing is written then, from the
    # parsers (built for it), not at %load_ext
    job.__doc__ = _JOB_DOC.split("\n", 1)[0]
    job.__dict__["getdoc"] = full_doc

    def _do_debug(self, command: job_args.JobCommand) -> None:
        from ..runtime import log as _log

        on = command.name != "off"
        _log.set_debug(on)
        if on:
            print(
                f"monarch_jupyter: showing monarch_jupyter's and Monarch's log records (%job debug off stops; "
                f"%env {_log.DEBUG_VAR}=1 before %load_ext turns it on at load)"
            )
        else:
            print("monarch_jupyter: log records hidden again")

    def _do_status(self, command: job_args.JobCommand) -> None:
        status = self.session.status(command.context)
        if not self.hooks.show_status(self.session, status):
            display(formatting.StatusView(status))
        context_dir = self.session.layout.dir / status.context
        runs = batch.runs(context_dir) if context_dir.is_dir() else []
        if runs:
            print(batch.lines(runs))
        if not command.context:
            _print(self.hooks.runs_note(self.session))

    def _do_apply(self, command: job_args.JobCommand) -> None:
        from .specs.parse import parse_apply

        try:
            namespace = self.shell.user_ns if self.shell is not None else None
            spec = parse_apply(command.spec_text, str(self.session.root))
            result = self.session.apply(spec, namespace=namespace)
        except Interrupted:
            raise
        except KeyboardInterrupt:
            raise Interrupted(
                "%job apply interrupted: the workers it started are being stopped; "
                "%job shows which job the context has now"
            ) from None
        print(formatting.apply_line(result))

    def _do_kill(self, command: job_args.JobCommand) -> None:
        if command.context and batch.is_id(command.context):  # a batch run: see batch.py
            run = batch.kill(self._context_dir(), command.context)
            print(f"batch run {run.id}: {run.state}")
            return
        killed = self.session.kill(command.context, before=self._stop_runs(command.context))
        print(formatting.kill_line(killed))
        if "admin" in killed.services and killed.attached:
            print(
                "the mesh admin's loopback port stays open in this kernel until it restarts "
                "(Monarch 0.7 cannot stop it)"
            )

    def _stop_runs(self, context: str | None) -> Callable[[], None] | None:
        """What stops the context's runs before its job is killed, not left running unseen."""
        if context and context != self.session.context:
            return None

        def stop() -> None:
            _print(self.hooks.stop_runs(self.session))

        return stop

    # ── batch runs (batch.py) ───────────────────────────────────────────
    def _context_dir(self):
        return self.session.layout.dir / self.session.context

    def _do_batch(self, command: job_args.JobCommand) -> None:
        run = batch.start(
            self._context_dir(), _given(command.script, command), self.session.root, command.spec
        )
        where = f"Slurm job {run.slurm_job_id}" if run.slurm_job_id else f"pid {run.pid}"
        print(
            f"batch run {run.id} started: {command.script} ({where}); "
            f"%job logs {run.id} --follow streams {os.path.relpath(run.log, self.session.root)}"
        )

    def _do_logs(self, command: job_args.JobCommand) -> None:
        run_id = _given(command.name, command)
        if not command.follow:
            run = batch.load(self._context_dir(), run_id)
            size = run.log.stat().st_size if run.log.exists() else 0
            text, _ = batch.read_log(run, max(0, size - batch.TAIL_BYTES))
            print(text, end="")
            print(f"[batch run {run.id}: {run.state}]")
            return
        try:
            for text in batch.follow(self._context_dir(), run_id):
                print(text, end="", flush=True)
        except KeyboardInterrupt:
            print(f"\n[stopped following {run_id}; the script keeps running: %job kill {run_id} stops it]")
            return
        print(f"[batch run {run_id}: {batch.load(self._context_dir(), run_id).state}]")

    def _do_query(self, command: job_args.JobCommand) -> Any:
        from .services import display as query_display
        from .services import query

        if command.tables:
            print(query.tables_text(self.session))
            return None
        result = query.run_in(self.session, command.sql)
        if command.pandas:
            frame = query.to_pandas(result.table)
            print(f"({result.caption()})")
            return frame
        query_display.install(self.shell)
        query_display.remember(result)
        return result.table

    def _do_profile(self, command: job_args.JobCommand) -> None:
        from .services import profile

        handle: Any = None

        def done(result: profile.Profile) -> None:
            if handle is not None:
                handle.update(result)

        result = profile.start(self.session, command.seconds, done)
        handle = display(result, display_id=True)
        if result.done:  # finished before the handle existed
            handle.update(result)

    def _do_refresh(self, command: job_args.JobCommand) -> None:
        count = self.session.refresh_mounts()
        print(f"refreshed {count} mount(s): the workers see the sources as they are now")

    def _do_topology(self, command: job_args.JobCommand) -> None:
        from .services import admin, topology

        status = self.session.status()
        if status.state != RUNNING:
            raise MonarchJupyterError(f"no running job in context '{status.context}': %job apply starts one")
        sample = admin.sample(status.urls, self._topology, command.system, command.stuck_after)
        self._topology = sample
        print(topology.text(sample))

    def _do_reconnect(self, command: job_args.JobCommand) -> None:
        print(formatting.attach_line(self.session.reconnect()))

    def _do_trust(self, command: job_args.JobCommand) -> None:
        path = os.path.relpath(self.session.store.state_path(), self.session.root)
        what, status = self.session.trust()
        print(f"trusted {path} ({what}): signed as yours")
        print(formatting.attach_line(status))

    def _do_context_ls(self, command: job_args.JobCommand) -> None:
        print(formatting.contexts_text(self.session.contexts()))

    def _do_context_create(self, command: job_args.JobCommand) -> None:
        made = self.session.create(_given(command.name, command))
        print(f"created context '{command.name}'" if made else f"context '{command.name}' already exists")

    def _do_context_use(self, command: job_args.JobCommand) -> None:
        # As `monarch context use`, a new name creates the context; said, so a typo shows.
        name = _given(command.name, command)
        created = not self.session.layout.exists(name)
        status = self.session.use(name)
        if created:
            others = [other for other in self.session.layout.names() if other != name]
            print(formatting.created_context_line(name, others))
        print(f"switched to context '{name}'")
        print(formatting.attach_line(status))

    def _do_context_rm(self, command: job_args.JobCommand) -> None:
        killed = self.session.remove(_given(command.name, command))
        extra = f" (killed {killed.job_class} {formatting.short_id(killed.apply_id)})" if killed else ""
        print(f"removed context '{command.name}'{extra}")


def _print(line: str | None) -> None:
    if line:
        print(line)


def _given(value: str | None, command: job_args.JobCommand) -> str:
    """A word the parser requires for ``command`` (NAME, SCRIPT)."""
    if value is None:
        raise UsageError(f"%job {command.command}: a name is missing")
    return value
