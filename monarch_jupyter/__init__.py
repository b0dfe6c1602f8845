"""monarch_jupyter: Monarch jobs as a first-class notebook experience.

``%load_ext monarch_jupyter`` registers ``%job`` (and the other magics) and
re-attaches to the current context's job when its workers are alive. The
running job is also reachable from Python::

    import monarch_jupyter
    monarch_jupyter.job()      # the JobTrait
    monarch_jupyter.state()    # its JobState; .hosts etc. are HostMeshes

    try:
        %remote false
    except monarch_jupyter.RemoteError: ...   # a failing rank (the base: MonarchJupyterError)

This module stays cheap to import: Monarch loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real names, for checkers; at run time __getattr__ imports them on first use
    from monarch.job import JobState, JobTrait

    from . import actors as actors
    from .errors import MonarchJupyterError as MonarchJupyterError
    from .jobs.facade import JobContext
    from .remote.errors import RemoteError as RemoteError

__all__ = [
    "MonarchJupyterError",
    "RemoteError",
    "current_session",
    "job",
    "load_ipython_extension",
    "profile",
    "query",
    "state",
    "unload_ipython_extension",
]

_session: JobContext | None = None


def __getattr__(name: str) -> Any:
    # The version is written once, in labextension/package.json; the build puts it
    # in the installed metadata (see pyproject.toml), read here on first use.
    if name == "__version__":
        from importlib.metadata import version

        return version("monarch_jupyter")
    if name == "actors":  # monarch_jupyter.actors.live_output(False) without an import first
        import importlib

        return importlib.import_module(".actors", __name__)
    if name == "RemoteError":
        from .remote.errors import RemoteError

        return RemoteError
    if name == "MonarchJupyterError":
        from .errors import MonarchJupyterError

        return MonarchJupyterError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:  # the public names (lazy ones too), for completion
    return sorted({*__all__, "actors", "__version__", *(name for name in globals() if name.startswith("__"))})


def current_session() -> JobContext:
    """The process-wide :class:`~monarch_jupyter.jobs.facade.JobContext`."""
    global _session
    if _session is None:
        from .jobs.facade import JobContext

        _session = JobContext()
    return _session


def job() -> JobTrait:
    """The running JobTrait of the current context (re-attached if needed)."""
    found = current_session().job()
    _actors_hook()
    return found


def state() -> JobState:
    """The JobState of the current context's running job: ``state().hosts`` is a HostMesh."""
    found = current_session().state()
    _actors_hook()
    return found


def query(sql: str, pandas: bool = False) -> Any:
    """The rows of ``sql`` on the running job's telemetry as a ``pyarrow.Table`` (column order and
    types kept), or a pandas DataFrame with ``pandas=True``; one-line MonarchJupyterError on failure."""
    from .jobs.services.query import query as run

    return run(current_session(), sql, pandas)


def profile() -> Any:
    """``with monarch_jupyter.profile() as p: ...``: a Perfetto trace of the block, written under
    ``.monarch/<context>/`` (``p.path``) and shown with its spans per actor and endpoint when the
    block ends (needs a job with telemetry)."""
    from .jobs.services.profile import Block

    return Block(current_session(), show=_show)


def _show(value: Any) -> None:
    """Display ``value`` in the running cell (IPython), else print its text."""
    from IPython import get_ipython

    if get_ipython() is not None:
        from IPython.display import display

        display(value)
    else:
        print(value.text() if hasattr(value, "text") else value)


def _actors_hook() -> None:
    # procs spawned on the meshes handed out report their output and every rank's errors
    from .actors import enable

    enable(current_session())


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics and re-attach to the current context's job (in the background)."""
    from .extension.load import load

    load(ipython, current_session())


def unload_ipython_extension(ipython: Any) -> None:
    """Nothing to undo: the job keeps running; %job kill ends it."""


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "monarch_jupyter"}]
