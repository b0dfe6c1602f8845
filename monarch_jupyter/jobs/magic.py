"""The ``%job`` line magic: a thin shell over :class:`~monarch_jupyter.jobs.facade.JobContext`.

Parsing and help come from :mod:`.args`, each verb from :mod:`.verbs` (declared and handled in
one place); every failure a user can act on is one ``UsageError`` line.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

from ..errors import MonarchJupyterError
from . import args as job_args
from . import verbs
from .facade import JobContext
from .verbs.registry import JobHooks

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


@magics_class
class JobMagics(Magics):
    def __init__(self, shell, session: JobContext, hooks: JobHooks | None = None) -> None:
        super().__init__(shell)
        self.session = session
        self.hooks = hooks or JobHooks()
        self.topology: Any = None  # the last %job topology sample: the next one is judged against it

    @line_magic
    def job(self, line: str) -> Any:
        try:
            command = job_args.parse(line)
        except job_args.HelpRequested as request:
            print(request.text)
            return
        except job_args.ArgumentsError as error:
            raise UsageError(str(error)) from None
        try:
            return verbs.dispatch(self, command.command, command.options)
        except MonarchJupyterError as error:
            raise UsageError(f"%job {command.command}: {error}") from None

    # %job? asks IPython's inspector, which calls getdoc(): the listing is written then, from the
    # parsers (built for it), not at %load_ext
    job.__doc__ = _JOB_DOC.split("\n", 1)[0]
    job.__dict__["getdoc"] = full_doc

    # ── the verbs' Cell (jobs/verbs/registry.py) ─────────────────────────
    @property
    def user_ns(self) -> dict[str, Any] | None:
        return self.shell.user_ns if self.shell is not None else None

    def display(self, value: Any, **options: Any) -> Any:
        return display(value, **options)

    def install_query_display(self) -> None:
        from .services import display as query_display

        query_display.install(self.shell)
