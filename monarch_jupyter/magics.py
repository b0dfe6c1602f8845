"""The ``%job`` line magic: a thin shell over :class:`~monarch_jupyter.session.JobSession`."""

from __future__ import annotations

import shlex

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

from . import formatting
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
        %job apply module.attr      apply a JobTrait importable from the notebook's folder
        %job apply NAME             apply the JobTrait held by notebook variable NAME
        %job apply                  re-apply the context's saved spec
        %job kill [CONTEXT]         reap the workers and remove the state file
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
                f"%job: unknown subcommand {verb!r}; use status, apply, kill, reconnect or context (see %job?)"
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
        if not args:
            _runs_note(self.session)

    def _do_apply(self, _args: list[str], rest: str) -> None:
        result = self.session.apply(parse_apply(rest), namespace=self.shell.user_ns)
        print(formatting.apply_line(result))

    def _do_kill(self, args: list[str], _rest: str) -> None:
        if len(args) > 1:
            raise UsageError("%job kill takes at most one CONTEXT")
        if not args or args[0] == self.session.context:  # its runs first, while the workers answer
            from .remote import runs
            from .remote.runner import runner_for

            note = runs.stop_for_kill(self.session, runner_for(self.session))
            if note:
                print(note)
        print(formatting.kill_line(self.session.kill(args[0] if args else None)))

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


def _runs_note(session: JobSession) -> None:
    """One line about the context's runs still running (``%remote runs`` has the rest)."""
    from .remote import runs

    note = runs.restart_note(session)
    if note:
        print(note)
