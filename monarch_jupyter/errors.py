"""Errors a user can act on: one line each, shown without a traceback."""


class MonarchJupyterError(Exception):
    """A problem with a clear fix; magics show ``str(error)`` as a UsageError."""


class NoJobError(MonarchJupyterError):
    """The current context has no job to act on."""


class CacheError(MonarchJupyterError):
    """The pickle cache is unsafe, corrupt or not a job; it is left untouched."""


class SpecError(MonarchJupyterError):
    """A job spec could not be parsed or resolved to a JobTrait."""
