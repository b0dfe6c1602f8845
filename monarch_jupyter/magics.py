"""The ``%job`` line magic: a thin shell over :class:`~monarch_jupyter.session.JobSession`."""

from __future__ import annotations

import os
import shlex

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

from . import batch, formatting
from .errors import MonarchJupyterError
from .session import JobSession
from .specs import parse_apply

_CONTEXT_VERBS = ("ls", "use", "create", "rm")


@magics_class
class JobMagics(Magics):
    def __init__(self, shell, session: JobSession) -> None:
        super().__init__(shell)
        self.session = session

    @line_magic
    def job(self, line: str) -> None:
        """Manage the Monarch job of the current context (mirrors the `monarch` CLI).

        %job [status [CONTEXT]]     show the job: class, apply id, state, meshes, URLs
        %job apply --local MESH=N[,MESH=N...]
                                    start a local job: one worker process per host
        %job apply --ssh MESH=H1,H2 [--python PATH] [--port N] [--config FILE]
                                    start an SSHJob on hosts of your ssh config (workers
                                    need torchmonarch of this version on that Python)
        %job apply module.attr      apply a JobTrait importable from the notebook's folder
        %job apply NAME             apply the JobTrait held by notebook variable NAME
        %job apply                  re-apply the context's saved spec
        %job kill [CONTEXT]         reap the workers and remove the state file
        %job batch SCRIPT [module.attr]
                                    run a client script detached, as Monarch's batch mode
                                    does, in its own folder (never touches the job cache);
                                    with a SlurmJob spec, inside a Slurm allocation
        %job logs ID [--follow]     print a batch run's output (--follow: live; Ctrl-C
                                    stops following, not the script)
        %job kill ID                stop a batch run (its process group)
        %job reconnect              drop connections and re-attach from the cache
        %job context ls             list contexts (* marks the active one)
        %job context use NAME       switch the active context (attaches to its job)
        %job context create NAME    create a context
        %job context rm NAME        kill a context's job and delete the context

        Applying when the running job can already run the spec does nothing.
        State lives in .monarch/ of the current folder, shared with `monarch`:
        a job applied here or by `monarch apply` survives kernel restarts.
        From Python: monarch_jupyter.job() and monarch_jupyter.state().
        """
        try:
            words = shlex.split(line)
        except ValueError as error:
            raise UsageError(f"%job: {error}") from None
        verb, args = (words[0], words[1:]) if words else ("status", [])
        handler = getattr(self, f"_do_{verb}", None)
        if handler is None:
            raise UsageError(
                f"%job: unknown subcommand {verb!r}; use status, apply, kill, batch, logs, reconnect or context (see %job?)"
            )
        try:
            handler(args, line.strip()[len(verb):].strip())
        except MonarchJupyterError as error:
            raise UsageError(f"%job {verb}: {error}") from None

    # Each handler gets the split words and the raw rest of the line.
    def _do_status(self, args: list[str], _rest: str) -> None:
        if len(args) > 1:
            raise UsageError("%job status takes at most one CONTEXT")
        status = self.session.status(args[0] if args else None)
        from .widgets import in_widget_kernel

        if in_widget_kernel(self.shell):
            from .widgets.job import JobWidget

            # One output: the live widget plus text/plain and text/html fallbacks
            # (the same as StatusView's) for nbconvert, nbval and saved notebooks.
            # The fallbacks are a snapshot, like any output: re-sending them on
            # every status change would put update messages in other cells' IOPub
            # and make the saved text differ from what nbval sees.
            display(JobWidget(self.session, status))
        else:
            display(formatting.StatusView(status))
        runs = batch.runs(self.session.layout.dir / status.context) if self.session.layout.exists(status.context) else []
        if runs:
            print(batch.lines(runs))

    def _do_apply(self, _args: list[str], rest: str) -> None:
        result = self.session.apply(parse_apply(rest), namespace=self.shell.user_ns)
        print(formatting.apply_line(result))

    def _do_kill(self, args: list[str], _rest: str) -> None:
        if len(args) > 1:
            raise UsageError("%job kill takes at most one CONTEXT or batch ID")
        if args and batch.is_id(args[0]):  # batch runs: see batch.py
            run = batch.kill(self._context_dir(), args[0])
            print(f"batch run {run.id}: {run.state}")
            return
        print(formatting.kill_line(self.session.kill(args[0] if args else None)))

    # ── batch runs (batch.py) ───────────────────────────────────────────
    def _context_dir(self):
        return self.session.layout.dir / self.session.context

    def _do_batch(self, args: list[str], _rest: str) -> None:
        if len(args) not in (1, 2):
            raise UsageError("%job batch takes one SCRIPT and optionally a module.attr SlurmJob spec")
        run = batch.start(self._context_dir(), args[0], self.session.root, args[1] if len(args) == 2 else None)
        where = f"Slurm job {run.slurm_job_id}" if run.slurm_job_id else f"pid {run.pid}"
        print(f"batch run {run.id} started: {args[0]} ({where}); "
              f"%job logs {run.id} --follow streams {os.path.relpath(run.log, self.session.root)}")

    def _do_logs(self, args: list[str], _rest: str) -> None:
        follow = "--follow" in args or "-f" in args
        ids = [a for a in args if a not in ("--follow", "-f")]
        if len(ids) != 1:
            raise UsageError("%job logs takes one batch ID and optionally --follow")
        if not follow:
            run = batch.load(self._context_dir(), ids[0])
            size = run.log.stat().st_size if run.log.exists() else 0
            text, _ = batch.read_log(run, max(0, size - batch.TAIL_BYTES))
            print(text, end="")
            print(f"[batch run {run.id}: {run.state}]")
            return
        try:
            for text in batch.follow(self._context_dir(), ids[0]):
                print(text, end="", flush=True)
        except KeyboardInterrupt:
            print(f"\n[stopped following {ids[0]}; the script keeps running: %job kill {ids[0]} stops it]")
            return
        print(f"[batch run {ids[0]}: {batch.load(self._context_dir(), ids[0]).state}]")

    def _do_reconnect(self, args: list[str], _rest: str) -> None:
        if args:
            raise UsageError("%job reconnect takes no arguments")
        print(formatting.attach_line(self.session.reconnect()))

    def _do_context(self, args: list[str], _rest: str) -> None:
        verb = args[0] if args else "ls"
        if verb not in _CONTEXT_VERBS:
            raise UsageError(f"%job context: unknown action {verb!r}; use ls, use, create or rm")
        if verb == "ls":
            if len(args) > 1:
                raise UsageError("%job context ls takes no arguments")
            print(formatting.contexts_text(self.session.contexts()))
            return
        if len(args) != 2:
            raise UsageError(f"%job context {verb} takes one NAME")
        name = args[1]
        if verb == "create":
            made = self.session.create(name)
            print(f"created context '{name}'" if made else f"context '{name}' already exists")
        elif verb == "use":
            status = self.session.use(name)
            print(f"switched to context '{name}'")
            print(formatting.attach_line(status))
        else:
            killed = self.session.remove(name)
            extra = f" (killed {killed.job_class} {formatting.short_id(killed.apply_id)})" if killed else ""
            print(f"removed context '{name}'{extra}")
