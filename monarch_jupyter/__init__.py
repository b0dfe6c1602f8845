"""monarch_jupyter: Monarch jobs as a first-class notebook experience.

``%load_ext monarch_jupyter`` registers ``%job`` (and the other magics) and
re-attaches to the current context's job when its workers are alive. The
running job is also reachable from Python::

    import monarch_jupyter
    monarch_jupyter.job()      # the JobTrait
    monarch_jupyter.state()    # its JobState; .hosts etc. are HostMeshes

This module stays cheap to import: Monarch loads on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_session: Any = None


def current_session() -> Any:
    """The process-wide :class:`~monarch_jupyter.session.JobSession`."""
    global _session
    if _session is None:
        from .session import JobSession

        _session = JobSession()
    return _session


def job() -> Any:
    """The running JobTrait of the current context (re-attached if needed)."""
    return current_session().job()


def state() -> Any:
    """The JobState of the current context's running job: ``state().hosts`` is a HostMesh."""
    return current_session().state()


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics and re-attach to the current context's job."""
    from . import formatting
    from ._quiet import install
    from .errors import MonarchJupyterError
    from .magics import JobMagics

    install()
    current = current_session()
    ipython.register_magics(JobMagics(ipython, current))
    try:
        from .remote.magic import register as register_remote
    except ImportError:
        register_remote = None
    if register_remote is not None:
        register_remote(ipython, current)
    try:
        print(formatting.attach_line(current.attach()))
    except MonarchJupyterError as error:
        print(f"monarch_jupyter: {error}")
    if register_remote is not None:  # runs a previous kernel left running
        from .magics import _runs_note

        _runs_note(current)


def unload_ipython_extension(ipython: Any) -> None:
    """Nothing to undo: the job keeps running; %job kill ends it."""


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "monarch_jupyter"}]
