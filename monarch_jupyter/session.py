"""The kernel-side job session: the lifecycle of the current context's job.

``JobSession`` is what the ``%job`` magics call; it does not import IPython and
can be driven from a plain script or a test. All blocking Monarch calls run on
the one owned loop (see ``_loop``), never on the kernel's thread. Everything is
relative to the current directory at call time, like the ``monarch`` CLI: after
``%cd`` the session follows the other folder's ``.monarch/``.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from . import _introspect, _orphans, _quiet, cache
from ._loop import EventLoopThread, shared_loop
from .contexts import Layout, check_name
from .errors import MonarchJupyterError, NoJobError, SpecError
from .specs import LocalSpec, ModuleSpec, Spec, VariableSpec, spec_from_saved

RUNNING = "running"
NOT_RUNNING = "not running"
WORKERS_DEAD = "workers dead"
NO_JOB = "no job"


@dataclass
class MeshStatus:
    name: str
    hosts: int | None
    live_workers: int | None


@dataclass
class JobStatus:
    """Plain-data snapshot of a context's job; views format it, tests compare it."""

    context: str
    state: str
    job_class: str | None = None
    apply_id: str | None = None
    spec: str | None = None
    meshes: list[MeshStatus] = field(default_factory=list)
    urls: dict[str, str | None] = field(default_factory=dict)
    worker_pids: dict[str, int] = field(default_factory=dict)
    applied_at: float | None = None
    cache_path: str | None = None
    attached: bool = False
    note: str | None = None  # e.g. where an unreadable cache was moved (issue #9)

    def to_json(self) -> dict:
        data = asdict(self)
        data["updated"] = _iso(time.time())
        data["applied"] = _iso(self.applied_at) if self.applied_at else None
        return data


@dataclass
class ApplyResult:
    status: JobStatus
    changed: bool
    replaced_apply_id: str | None = None
    note: str | None = None


def _iso(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class JobSession:
    """The job of the current folder's active context, attached at most once."""

    def __init__(
        self,
        loop: EventLoopThread | None = None,
        cwd: Callable[[], str] = os.getcwd,
    ) -> None:
        self.loop = loop or shared_loop()
        self._cwd = cwd
        self._job: Any = None
        self._state: Any = None
        self._attached_to: tuple[str, str] | None = None
        self._cache_stamp: tuple[int, int] | None = None
        self._spec_label: str | None = None
        self._listeners: list[Callable[[JobStatus], None]] = []

    # ── who wants to know ───────────────────────────────────────────────
    def add_listener(self, listener: Callable[[JobStatus], None]) -> Callable[[], None]:
        """Call ``listener(status)`` whenever a context's status is published
        (apply, kill, attach, status, context switch); returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    # ── where we are ────────────────────────────────────────────────────
    @property
    def root(self) -> Path:
        return Path(self._cwd())

    @property
    def layout(self) -> Layout:
        return Layout(self.root)

    @property
    def context(self) -> str:
        return self.layout.current()

    def _state_path(self, context: str | None = None) -> Path:
        layout = self.layout
        name = context or layout.current()
        legacy = layout.legacy_state()
        if legacy is not None and context in (None, "default"):
            return legacy
        return layout.state_path(name)

    def _key(self) -> tuple[str, str]:
        return (str(self.root.resolve()), self.context)

    def _stamp(self) -> tuple[int, int] | None:
        try:
            info = self._state_path().stat()
        except OSError:
            return None
        return (info.st_ino, info.st_mtime_ns)

    def _forget_if_moved(self) -> None:
        """Drop the attachment after %cd, a context switch, or a cache change by
        someone else (``monarch kill`` or another kernel's apply)."""
        if self._attached_to is None:
            return
        if self._attached_to != self._key() or self._stamp() != self._cache_stamp:
            self._drop()

    def _remember(self, job: Any, state: Any) -> None:
        self._job, self._state = job, state
        self._attached_to = self._key()
        self._cache_stamp = self._stamp()

    def _drop(self) -> None:
        self._job = None
        self._state = None
        self._attached_to = None
        self._cache_stamp = None
        self._spec_label = None

    # ── reading the cache ───────────────────────────────────────────────
    def _load_cached(self, context: str | None = None) -> Any | None:
        path = self._state_path(context)
        if not path.exists():
            return None
        _quiet.install()
        return cache.load_job(path)

    # ── attach / status ─────────────────────────────────────────────────
    @property
    def attached(self) -> bool:
        self._forget_if_moved()
        return self._job is not None

    def attach(self) -> JobStatus:
        """Re-attach to the cached job if its workers are alive; never applies.

        Returns the status; ``status.attached`` tells whether it connected.
        """
        self._forget_if_moved()
        if self._job is not None:
            return self.status()
        job = self._load_cached()
        if job is None or not _introspect.is_alive(job):
            return self.status(job_override=job)
        self._connect(job)
        return self.status()

    def _connect(self, job: Any) -> None:
        def connect() -> Any:
            _quiet.start_client_context()
            # The cached job's status is "running": state() connects to it and
            # never applies; cached_path=None keeps Monarch off our cache file.
            return job.state(cached_path=None)

        self._remember(job, self.loop.call(connect))

    def status(self, context: str | None = None, job_override: Any = None) -> JobStatus:
        """Snapshot of a context's job (default: current). Never applies anything."""
        self._forget_if_moved()
        name = check_name(context) if context else self.context
        current = name == self.context
        path = self._state_path(name)
        if current and self._job is not None:
            job, state = self._job, self._state
        else:
            job = job_override if job_override is not None else self._load_cached(name)
            state = None
        status = self._describe(name, job, state, path)
        if current:
            self._publish(name, status)
        return status

    def _describe(self, name: str, job: Any, state: Any, path: Path) -> JobStatus:
        spec = self.layout.read_spec(name) if self.layout.exists(name) else None
        if job is None:
            return JobStatus(context=name, state=NO_JOB, spec=spec or self._spec_label)
        host_meshes = dict(getattr(state, "_hosts", {}) or {}) if state is not None else None
        sizes = _introspect.mesh_sizes(job, host_meshes)
        live = _introspect.live_workers(job, sizes)
        if _introspect.running_job(job) is None:
            condition = NOT_RUNNING
        elif _introspect.is_alive(job):
            condition = RUNNING
        else:
            condition = WORKERS_DEAD
        try:
            applied_at = path.stat().st_mtime
        except OSError:
            applied_at = None
        return JobStatus(
            context=name,
            state=condition,
            job_class=type(_introspect.running_job(job) or job).__name__,
            apply_id=getattr(job, "apply_id", None),
            spec=spec or (self._spec_label if state is not None else None),
            meshes=[MeshStatus(m, sizes[m], live.get(m)) for m in sizes],
            urls=_introspect.urls(job, state),
            worker_pids=_introspect.worker_pids(job),
            applied_at=applied_at,
            cache_path=os.path.relpath(path, self.root) if path.exists() else None,
            attached=state is not None,
        )

    def _publish(self, name: str, status: JobStatus) -> None:
        """Write status.json for the sidebar (which never unpickles) and tell listeners."""
        try:
            if self.layout.exists(name):
                self.layout.write_status(name, status.to_json())
        except OSError:
            pass
        for listener in list(self._listeners):
            try:
                listener(status)
            except Exception:
                pass  # a broken view must not break the lifecycle

    # ── apply ───────────────────────────────────────────────────────────
    def resolve(self, spec: Spec | None, namespace: Mapping[str, Any] | None = None) -> tuple[Any, str | None, str]:
        """Turn a spec into ``(job, saved_path_or_None, label)``; SpecError if it can't."""
        if spec is None:
            saved = self.layout.read_spec(self.context, trusted=True)  # it leads to an import
            if saved is None:
                raise SpecError(
                    f"context '{self.context}' has no saved spec: "
                    "run %job apply --local hosts=2 (or module.attr, or a variable name)"
                )
            spec = spec_from_saved(saved)
        if isinstance(spec, LocalSpec):
            from monarch.job import ProcessJob

            return ProcessJob(dict(spec.meshes)), spec.path, spec.describe()
        if isinstance(spec, ModuleSpec):
            return _import_job(spec.path, self.root), spec.path, spec.path
        if isinstance(spec, VariableSpec):
            if namespace is None or spec.name not in namespace:
                raise SpecError(
                    f"no variable {spec.name!r} in the notebook; "
                    "give --local MESH=N, module.attr or the name of a JobTrait variable"
                )
            job = namespace[spec.name]
            _require_job(job, f"variable {spec.name!r}")
            return job, _saved_path_for(job), f"variable {spec.name}"
        raise SpecError(f"unsupported spec {spec!r}")

    @cache.locked_method
    def apply(self, spec: Spec | None = None, namespace: Mapping[str, Any] | None = None) -> ApplyResult:
        """Apply ``spec`` in the current context (a no-op when the running job can run it).

        The new job is started and connected before the old one is touched: if
        it fails, the previous job and its cache stay as they were.
        """
        job, saved_path, label = self.resolve(spec, namespace)
        name = self.context
        self._forget_if_moved()
        note = _orphans.reaped_line(_orphans.reap_leftovers(self.layout.dir))  # issue #9
        try:
            old = self._job if self._job is not None else self._load_cached()  # CacheError: one line, nothing touched
        except cache.UnreadableCacheError:
            old, note = None, self._move_aside(name)
        if old is not None and _introspect.is_alive(old) and _can_run(old, job):
            if self._job is None:
                self._connect(old)
            self._save_spec(name, saved_path)
            self._spec_label = label
            return ApplyResult(self.status(), changed=False)

        guard = _orphans.ApplyGuard(self.layout.context_dir(name), job)  # issue #9: no orphans

        def start() -> Any:
            _quiet.start_client_context()
            try:
                with guard:
                    state = job.state(cached_path=None)
                if guard.abandoned.is_set():
                    raise _orphans.ApplyAbandoned()
                return state
            except BaseException:
                _kill_quietly(job)
                guard.done()
                raise

        try:
            state = self.loop.call(start)
        except KeyboardInterrupt:
            guard.abandoned.set()
            raise
        except MonarchJupyterError:
            raise
        except Exception as error:
            raise MonarchJupyterError(
                f"applying {label} failed: {type(error).__name__}: {error}; "
                "the previous job and its cache were left as they were"
            ) from None

        replaced = None
        if old is not None and _introspect.running_job(old) is not None:
            replaced = getattr(old, "apply_id", None)
            self.loop.call(_kill_quietly, old)
        self.layout.ensure()
        self.layout.create(name)
        try:
            cache.dump_job(job, self._state_path(name))
        except BaseException:
            self.loop.call(_kill_quietly, job)
            raise
        finally:
            guard.done()
        self._save_spec(name, saved_path)
        self._remember(job, state)
        self._spec_label = label
        if saved_path is None:
            note = "\n".join(filter(None, [note, "this spec lives only in this kernel; the CLI and a bare %job apply cannot re-create it"]))
        return ApplyResult(self.status(), changed=True, replaced_apply_id=replaced, note=note)

    def _save_spec(self, name: str, saved_path: str | None) -> None:
        self.layout.ensure()
        self.layout.write_spec(name, saved_path)

    def _move_aside(self, name: str) -> str:
        """Move the context's unreadable cache aside (never delete it); say where."""
        path = self._state_path(name)
        moved = cache.quarantine(path)
        return (
            f"moved the unreadable {os.path.relpath(path, self.root)} aside to "
            f"{os.path.relpath(moved, self.root)}"
        )

    # ── kill / reconnect ───────────────────────────────────────────────
    @cache.locked_method
    def kill(self, context: str | None = None) -> JobStatus:
        """Reap the context's workers and delete its state file (as ``monarch kill``)."""
        self._forget_if_moved()
        name = check_name(context) if context else self.context
        if context and not self.layout.exists(name):
            raise NoJobError(f"no context '{name}' here: %job context ls lists them")
        current = name == self.context
        try:
            job = self._job if (current and self._job is not None) else self._load_cached(name)
        except cache.UnreadableCacheError:
            after = JobStatus(context=name, state=NO_JOB, note=self._move_aside(name) + "; no workers were known to kill")
            self._publish(name, after)
            return after
        if job is None:
            raise NoJobError(f"no job to kill in context '{name}' ({self._state_path(name)} does not exist)")
        before = self._describe(name, job, self._state if current else None, self._state_path(name))
        self.loop.call(_kill_quietly, job)
        cache.remove(self._state_path(name))
        if current:
            self._drop()
        after = JobStatus(context=name, state=NO_JOB, spec=before.spec)
        self._publish(name, after)
        return before

    def reconnect(self) -> JobStatus:
        """Drop the cached connection and attach again from the pickle."""
        self._drop()
        return self.attach()

    # ── contexts ────────────────────────────────────────────────────────
    def contexts(self) -> list:
        return self.layout.infos()

    @cache.locked_method
    def use(self, name: str) -> JobStatus:
        check_name(name)
        self._drop()
        self.layout.use(name)
        return self.attach()

    def create(self, name: str) -> bool:
        return self.layout.create(check_name(name))

    @cache.locked_method
    def remove(self, name: str) -> JobStatus | None:
        """Kill the context's job (if any) and delete the context, as ``monarch context rm``."""
        check_name(name)
        if not self.layout.exists(name):
            raise MonarchJupyterError(f"no context '{name}' here: %job context ls lists them")
        killed = None
        if self._state_path(name).exists():
            killed = self.kill(name)
        if name == self.context:
            self._drop()
        self.layout.remove(name)
        return killed

    # ── what user code and %%remote use ─────────────────────────────────
    def job(self) -> Any:
        """The attached JobTrait of the current context (attaching if needed)."""
        self._require_attached()
        return self._job

    def state(self) -> Any:
        """The JobState (host meshes) of the current context's running job."""
        self._require_attached()
        return self._state

    def host_meshes(self) -> dict[str, Any]:
        """Mesh name → HostMesh of the running job, in spec order."""
        return dict(self.state()._hosts)

    def _require_attached(self) -> None:
        if self.attached:
            return
        status = self.attach()
        if not status.attached:
            if status.state == NO_JOB:
                raise NoJobError(
                    f"no job in context '{status.context}': run %job apply --local hosts=2 first"
                )
            raise NoJobError(
                f"the job in context '{status.context}' is {status.state}: "
                "run %job apply to start it again (or %job kill to clear it)"
            )


def _can_run(old: Any, spec_job: Any) -> bool:
    running = _introspect.running_job(old)
    try:
        return bool(running is not None and running.can_run(spec_job))
    except Exception:
        return False


def _kill_quietly(job: Any) -> None:
    """Kill a job; a job that is already gone is not an error."""
    with _quiet.quietly():
        try:
            job.kill()
        except Exception:
            pass


def _require_job(obj: Any, what: str) -> None:
    from monarch.job import JobTrait

    if not isinstance(obj, JobTrait):
        raise SpecError(f"{what} is a {type(obj).__name__}, not a Monarch JobTrait")


def _saved_path_for(job: Any) -> str | None:
    """An importable spec path equivalent to ``job``, when there is one (plain ProcessJob)."""
    from monarch.job import ProcessJob

    if type(job) is ProcessJob and not getattr(job, "_env", None):
        meshes = getattr(job, "_meshes", None)
        if isinstance(meshes, dict):
            return LocalSpec(tuple(meshes.items())).path
    return None


def _import_job(path: str, root: Path) -> Any:
    """Import ``module.attr`` from the notebook's folder, as ``monarch apply`` does."""
    module_name, _, attr = path.rpartition(".")
    folder = str(root)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    importlib.invalidate_caches()
    try:
        module = sys.modules.get(module_name)
        origin = getattr(module, "__file__", None) or ""
        if module is not None and origin.startswith(folder + os.sep):
            module = importlib.reload(module)  # pick up edits, as a fresh CLI run would
        else:
            module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            raise SpecError(f"no module named {module_name!r} (looked in {folder} and sys.path)") from None
        raise SpecError(f"importing {module_name!r} failed: {error}") from None
    except Exception as error:
        raise SpecError(f"importing {module_name!r} failed: {type(error).__name__}: {error}") from None
    if not hasattr(module, attr):
        raise SpecError(f"module {module_name!r} has no attribute {attr!r}")
    job = getattr(module, attr)
    _require_job(job, f"{path!r}")
    return job
