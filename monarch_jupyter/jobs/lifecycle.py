"""Starting, reusing and replacing jobs: the apply policy, without files or IPython.

The rules, each a small function the session composes:

- a running job that can run the requested spec is reused, nothing is applied
  (:func:`reusable`);
- otherwise the new job is started and connected first; only when that worked
  is it recorded (``commit``) and then the old job killed (:func:`replace`). A
  failed start leaves the previous job running and its cache as it was, and
  reaps whatever the failed start left behind.

Blocking Monarch calls go through ``call`` (the session's ``EventLoopThread.call``;
a plain ``lambda fn, *a: fn(*a)`` in unit tests).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import MonarchJupyterError
from ..runtime import chatter as _quiet
from ..runtime import introspect as _introspect
from ..runtime import log as _log
from ..system import orphans as _orphans
from . import services
from .engines import Engine, engine_for
from .services import banners, features
from .services.features import FEATURES

Call = Callable[..., Any]
_debug = _log.get(__name__).debug


def reusable(old: Any, new: Any) -> bool:
    """Whether ``old`` (a cached or connected job) is alive and can run ``new``'s spec."""
    if old is None:
        _debug("apply policy: no previous job, a new one starts")
        return False
    alive = engine_for(old).is_alive(old)
    found = alive and can_run(old, new)
    _debug(
        "apply policy: previous %s alive=%s can_run=%s: %s",
        type(old).__name__,
        alive,
        found,
        "reused" if found else "a new job starts",
    )
    return found


def can_run(old: Any, new: Any) -> bool:
    """``old``'s allocation can run ``new`` (Monarch's ``JobTrait.can_run``)."""
    running = _introspect.running_job(old)
    if running is None:
        return False
    if _introspect.job_services(old) != _introspect.job_services(new):
        return False  # Monarch's can_run compares the meshes only; the services differ
    try:
        return bool(running.can_run(new))
    except Exception as error:
        _debug("can_run raised %s: %s; not reused", type(error).__name__, error)
        # can_run compares private fields and probes the allocation: a job pickled
        # by another Monarch version lacks a field (AttributeError, e.g. SSHJob's
        # _transport), or the probe fails (squeue, kubectl). Either way it cannot
        # be reused here, so a new job is applied.
        return False


def connect(job: Any) -> Any:
    """Connect to an already running ``job`` (never applies); returns its JobState."""
    engine = engine_for(job)
    _debug("attach: %s with %s, before_connect", type(job).__name__, type(engine).__name__)
    engine.before_connect(job)  # e.g. an unpickled SSHJob's transport
    _quiet.start_client_context()
    for feature in FEATURES:
        feature.before_state(job, applying=False)
    # cached_path=None keeps Monarch off our cache file; a re-attach starts the admin again:
    # its banner is not the cell's.
    with _quiet.quietly() if services.configured(job) else contextlib.nullcontext(), banners.to_log(None):
        state = job.state(cached_path=None)
    for feature in FEATURES:
        feature.after_state(job)
    _debug("attach: connected; after_connect")
    engine.after_connect(job)
    return state


def start(
    job: Any, guard: _orphans.ApplyGuard | None = None, log: Path | None = None, engine: Engine | None = None
) -> Any:
    """Apply ``job`` and connect to it; on failure reap what it started and raise StartFailed.

    ``guard`` (a context manager with an ``abandoned`` event, see ``_orphans.ApplyGuard``)
    records the workers as they start; once the kernel gave up on the apply, whatever
    started is killed and ``ApplyAbandoned`` is raised. ``log``: where an engine's
    processes write (SSH clients), see :mod:`.engines`. ``engine``: the job's, when the caller
    resolved it already (once per apply).
    """
    engine = engine or engine_for(job)
    _debug("start: %s with %s (output, state, after_start)", type(job).__name__, type(engine).__name__)
    refusal = features.refusal(job, engine.workers_are_local)
    if refusal is not None:
        raise StartFailed(refusal, None)
    _quiet.start_client_context()
    try:
        with engine.output(job, log) or _quiet.quietly(log), guard or contextlib.nullcontext():
            for feature in FEATURES:
                feature.before_state(job, applying=True)
            with banners.to_log(log):
                state = job.state(cached_path=None)
            for feature in FEATURES:
                feature.after_state(job)
        if guard is not None and guard.abandoned.is_set():
            raise _orphans.ApplyAbandoned("the apply was interrupted")
        engine.after_start(job, log)  # wait until the workers are really up (SSH)
        return state
    except KeyboardInterrupt:  # abandoned (or interrupted): reap, and say nothing more
        kill_error(job)
        if guard is not None:
            guard.done()
        raise
    except BaseException as error:  # PanicException derives from BaseException
        cleanup = kill_error(job)
        if guard is not None:
            guard.done()
        line = (
            engine.explain(job, error, log) or features.explain(error) or f"{type(error).__name__}: {error}"
        )
        _debug("start failed: %s; cleanup: %s", line, cleanup)
        raise StartFailed(line, cleanup) from None


def kill(job: Any) -> None:
    """Kill ``job``; Monarch's shutdown chatter is dropped, errors are raised.

    Monarch unmounts a job's mounts first and gives up on a busy one (a shell whose folder is in
    it), leaving workers and mounts up; those on this machine are then unmounted lazily (freed as
    the workers go) and the kill is asked again, so no mount is left behind (each feature's
    ``unblock_kill``). Then each feature's ``after_kill`` (the sidecar's files in /tmp)."""
    apply_id = getattr(job, "apply_id", None)  # read first: the kill may clear it
    with _quiet.quietly():
        try:
            job.kill()
        except Exception as error:
            local = engine_for(job).workers_are_local
            if not any([feature.unblock_kill(job, local, error) for feature in FEATURES]):
                raise
            _debug("kill: a feature freed what held the kill (%s), killing again", error)
            job.kill()
        if isinstance(apply_id, str) and apply_id:
            for feature in FEATURES:
                with contextlib.suppress(Exception):  # housekeeping: never fails a kill that worked
                    feature.after_kill(apply_id)


def kill_error(job: Any) -> str | None:
    """Kill ``job`` and return None, or the error that stopped it, as one line."""
    try:
        kill(job)
    except Exception as error:
        return features.explain(error) or f"{type(error).__name__}: {error}"  # e.g. the sidecar's traceback
    return None


class StartFailed(Exception):
    """A job did not start; ``cleanup`` says if reaping its remains failed too."""

    def __init__(self, reason: str, cleanup: str | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.cleanup = cleanup


@dataclass
class Replaced:
    state: Any
    replaced_apply_id: str | None = None
    kill_failed: str | None = None


def replace(
    new: Any,
    old: Any | None,
    *,
    label: str,
    call: Call,
    commit: Callable[[Any], None],
    guard: _orphans.ApplyGuard | None = None,
    log: Path | None = None,
    engine: Engine | None = None,
) -> Replaced:
    """Start ``new``, ``commit`` it, then kill ``old``; in that order, and only so far as each step worked.

    - ``new`` fails to start: ``old`` is untouched, nothing is committed; one-line error.
    - ``commit`` fails (the cache cannot be written): ``new`` is killed, ``old`` is untouched.
    - killing ``old`` fails: ``new`` stays (it is committed); the failure is returned.
    """
    try:
        state = call(start, new, guard, log, engine)
    except StartFailed as failure:
        extra = f" (reaping what it started also failed: {failure.cleanup})" if failure.cleanup else ""
        raise MonarchJupyterError(
            f"applying {label} failed: {failure.reason}; "
            f"the previous job and its cache were left as they were{extra}"
        ) from None
    try:
        commit(state)
    except BaseException as error:
        reaped = call(kill_error, new)
        if not isinstance(error, Exception):  # Ctrl-C: the new job is gone, stop here
            raise
        lost = f"; stopping the new job failed too ({reaped}): it may still be running" if reaped else ""
        if isinstance(error, MonarchJupyterError):
            raise MonarchJupyterError(f"{error}{lost}") from None
        raise MonarchJupyterError(
            f"applying {label}: the job started but could not be recorded "
            f"({type(error).__name__}: {error}), so it was stopped{lost}; "
            "the previous job and its cache were left as they were"
        ) from None
    if old is None or _introspect.running_job(old) is None:
        return Replaced(state)
    return Replaced(state, getattr(old, "apply_id", None), call(kill_error, old))
