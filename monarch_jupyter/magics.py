"""The ``%job`` line magic: a thin shell over :class:`~monarch_jupyter.session.JobSession`.

Parsing and help come from :mod:`.job_args`; every failure a user can act on is
one ``UsageError`` line.
"""

from __future__ import annotations

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

from . import formatting, job_args
from .errors import MonarchJupyterError
from .session import JobSession
from .specs import parse_apply

_JOB_DOC = """Manage the Monarch job of the current context (mirrors the `monarch` CLI).

{commands}

Applying when the running job can already run the spec does nothing.
State lives in .monarch/ of the current folder, shared with `monarch`:
a job applied here or by `monarch apply` survives kernel restarts.
`%job COMMAND -h` shows one command's arguments.
From Python: monarch_jupyter.job() and monarch_jupyter.state().
"""


@magics_class
class JobMagics(Magics):
    def __init__(self, shell, session: JobSession) -> None:
        super().__init__(shell)
        self.session = session

    @line_magic
    def job(self, line: str) -> None:
        try:
            command = job_args.parse(line)
        except job_args.HelpRequested as request:
            print(request.text)
            return
        except job_args.ArgumentsError as error:
            raise UsageError(str(error)) from None
        handler = getattr(self, "_do_" + command.command.replace(" ", "_"))
        try:
            handler(command)
        except MonarchJupyterError as error:
            raise UsageError(f"%job {command.command}: {error}") from None

    job.__doc__ = _JOB_DOC.format(commands=job_args.help_text())

    def _do_status(self, command: job_args.JobCommand) -> None:
        status = self.session.status(command.context)
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

    def _do_apply(self, command: job_args.JobCommand) -> None:
        result = self.session.apply(parse_apply(command.spec_text), namespace=self.shell.user_ns)
        print(formatting.apply_line(result))

    def _do_kill(self, command: job_args.JobCommand) -> None:
        print(formatting.kill_line(self.session.kill(command.context)))

    def _do_reconnect(self, command: job_args.JobCommand) -> None:
        print(formatting.attach_line(self.session.reconnect()))

    def _do_context_ls(self, command: job_args.JobCommand) -> None:
        print(formatting.contexts_text(self.session.contexts()))

    def _do_context_create(self, command: job_args.JobCommand) -> None:
        made = self.session.create(command.name)
        print(f"created context '{command.name}'" if made else f"context '{command.name}' already exists")

    def _do_context_use(self, command: job_args.JobCommand) -> None:
        status = self.session.use(command.name)
        print(f"switched to context '{command.name}'")
        print(formatting.attach_line(status))

    def _do_context_rm(self, command: job_args.JobCommand) -> None:
        killed = self.session.remove(command.name)
        extra = f" (killed {killed.job_class} {formatting.short_id(killed.apply_id)})" if killed else ""
        print(f"removed context '{command.name}'{extra}")
