"""The errors of ``%%remote`` and ``%remote``: each is shown as one line, without a traceback."""

from __future__ import annotations

from ..errors import MonarchJupyterError


class RemoteError(MonarchJupyterError):
    """A ``%%remote`` run failed (non-zero return codes, lost workers, bad target).

    Raised from the cell it shows as one line (no traceback) but still as an
    error, so nbval / papermill / nbclient runs fail.
    """

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class RemoteInterrupted(KeyboardInterrupt):
    """The cell was interrupted (or Stop was pressed): the remote processes were
    stopped and the output so far kept. A KeyboardInterrupt, so "run all" stops
    here, shown as one line instead of a traceback through the magic."""

    def _render_traceback_(self) -> list[str]:
        # the summary (str(self)) stands just above, as the run's result: not repeated here
        return ["KeyboardInterrupt: %%remote stopped on every rank; the output so far is kept above"]


class RunsError(MonarchJupyterError):
    """A ``%remote runs / attach / stop`` problem, shown in one line."""


class SessionError(MonarchJupyterError):
    """A ``%remote session / pull / push`` problem (no such session, a rank's error in a pull,
    a value too big), shown in one line."""
