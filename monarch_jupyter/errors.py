"""Errors a user can act on: one line each, shown without a traceback."""


class MonarchJupyterError(Exception):
    """A problem with a clear fix; magics show ``str(error)`` as a UsageError."""


class NoJobError(MonarchJupyterError):
    """The current context has no job to act on."""


class CacheError(MonarchJupyterError):
    """The pickle cache is unsafe, corrupt or not a job; it is left untouched."""


class SpecError(MonarchJupyterError):
    """A job spec could not be parsed or resolved to a JobTrait."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C that we handled (what it stopped is said in the message): shown as one
    ``KeyboardInterrupt: …`` line, no traceback; still a KeyboardInterrupt, so "run all" stops."""

    def _render_traceback_(self) -> list[str]:
        return [f"KeyboardInterrupt: {self}"]
