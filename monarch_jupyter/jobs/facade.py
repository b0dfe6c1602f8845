"""The kernel-side job session: the lifecycle of the current context's job.

``JobContext`` is the facade the ``%job`` magics, ``%%remote`` and the widgets
call; it does not import IPython and can be driven from a plain script or a
test. It composes small units, each with its own tests:

- :mod:`.store`: the contexts' pickle caches and saved specs (``.monarch/``);
- :mod:`.attachment`: which job this kernel is connected to, and when that lapses;
- :mod:`.resolve` (+ :mod:`.specs`): what a spec names;
- :mod:`.lifecycle`: reuse, start-before-kill replacement, kill;
- :mod:`.status`: plain-data statuses, published to views and ``status.json``.

All blocking Monarch calls run on the one owned loop (see ``_loop``), never on
the kernel's thread. Everything is relative to the current directory at call
time, like the ``monarch`` CLI: after ``%cd`` the session follows the other
folder's ``.monarch/``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import MonarchJupyterError, NoJobError, SpecError
from ..runtime import faults as _faults
from ..runtime import introspect as _introspect
from ..runtime import log as _log
from ..runtime.loop import EventLoopThread, shared_loop
from ..system import live as _live
from ..system import orphans as _orphans
from . import cache, engines, lifecycle, services
from . import local_records as _local_records
from .attachment import Attachment
from .contexts import Layout, check_name
from .engines import Engine, engine_for
from .status import NO_JOB, ApplyResult, JobStatus, StatusBoard, describe
from .store import JobStore, fingerprint

if TYPE_CHECKING:  # imported by the first apply, not at %load_ext
    from .resolve import Resolved
    from .specs.base import Spec

__all__ = ["JobContext"]


class BackgroundAttach(Protocol):
    """The attach ``%load_ext`` left running (``_warmup.Warmup``)."""

    def cancel(self) -> bool:
        """Call it off unless it began; whether it was."""
        ...

    def pending(self) -> bool:
        """Not finished, asked from another thread than its own."""
        ...


@dataclass(frozen=True)
class _Place:
    key: tuple  # the fingerprint these were read at
    root: str
    context: str
    stamp: tuple[int, int] | None


class JobContext:
    """The job of the current folder's active context, attached at most once."""

    def __init__(
        self,
        loop: EventLoopThread | None = None,
        cwd: Callable[[], str] = os.getcwd,
    ) -> None:
        self.loop = loop or shared_loop()
        self._cwd = cwd
        self._attachment = Attachment()
        self._cached_place: _Place | None = None
        self._board = StatusBoard()
        # Set by %load_ext while the cached job attaches in the background
        # (see _warmup): waits for that, interruptibly, before the session is used.
        self.ready_hook: Callable[[], None] | None = None
        # Set with it: that attach, to call it off or ask whether it is still under way.
        self.background: BackgroundAttach | None = None
        # The %%remote runner of this session, made by remote.runner.runner_for (Any: the
        # runner sits above the session in the layers, so the session names no type of it).
        self.remote_runner: Any = None

    # ── who wants to know ───────────────────────────────────────────────
    def add_listener(self, listener: Callable[[JobStatus], None]) -> Callable[[], None]:
        """Call ``listener(status)`` whenever a context's status is published
        (apply, kill, attach, status, context switch); returns an unsubscribe function."""
        return self._board.add_listener(listener)

    # ── where we are ────────────────────────────────────────────────────
    @property
    def root(self) -> Path:
        return Path(self._cwd())

    @property
    def layout(self) -> Layout:
        return Layout(self.root)

    @property
    def store(self) -> JobStore:
        return JobStore(self.layout)

    @property
    def context(self) -> str:
        return self._place().context

    def _place(self) -> _Place:
        """The resolved folder, its active context and the cache's stamp, re-read only
        when the folder's :func:`~.store.fingerprint` changed (``%cd``, a context
        switch, a cache written or removed by anyone), as every ``%%remote`` run asks."""
        cwd = self._cwd()
        key = fingerprint(cwd)  # taken first: a change after it shows next time
        place = self._cached_place
        if place is None or place.key != key:
            layout = Layout(cwd)
            context = layout.current()
            place = _Place(key, str(layout.root.resolve()), context, JobStore(layout).stamp())
            self._cached_place = place
        return place

    def _check_attachment(self) -> Attachment:
        """The attachment, forgotten first if the folder, context or cache moved on."""
        self._wait_ready()
        place = self._place()
        attachment = self._attachment
        job = attachment.job
        attachment.forget_unless(
            (place.root, place.context), place.stamp, lambda: engine_for(job).is_alive(job)
        )
        return attachment

    def _wait_ready(self) -> None:
        if self.ready_hook is not None:
            self.ready_hook()

    def _clear_attachment(self) -> None:
        self._wait_ready()  # a background attach must not land after this
        self._attachment.clear()

    def _remember(self, job: Any, state: Any) -> None:
        place = self._place()
        self._attachment.remember(job, state, (place.root, place.context), place.stamp)
        if engine_for(job).workers_are_local:  # a second record, outside .monarch/ (see _live)
            _live.record(
                place.root, place.context, getattr(job, "apply_id", None), _introspect.worker_pids(job)
            )

    # ── attach / status ─────────────────────────────────────────────────
    @property
    def attached(self) -> bool:
        return self._check_attachment().connected

    def attach(self) -> JobStatus:
        """Re-attach to the cached job if its workers are alive; never applies.

        Returns the status; ``status.attached`` tells whether it connected.
        """
        if self._check_attachment().connected:
            return self.status()
        job = self.store.load()
        if job is None or not engine_for(job).is_alive(job):
            _log.get(__name__).debug("attach: %s", "no cached job" if job is None else "its workers are dead")
            return self.status(job_override=job)
        self._remember(job, self.loop.call(lifecycle.connect, job))
        return self.status()

    def status(self, context: str | None = None, job_override: Any = None) -> JobStatus:
        """Snapshot of a context's job (default: current). Never applies anything."""
        pending = self.background is not None and self.background.pending()
        if pending and job_override is None and context in (None, self.context):
            early = self._status_while_attaching()
            if early is not None:
                return early
        attachment = self._check_attachment()
        name = check_name(context) if context else self.context
        current = name == self.context
        if current and attachment.connected:
            job, state = attachment.job, attachment.state
        else:
            job = job_override if job_override is not None else self.store.load(name)
            state = None
        status = self._describe(name, job, state)
        if current and attachment.connected and attachment.cache_gone:
            status.note = (
                f"the cache {os.path.relpath(self.store.state_path(name), self.root)} vanished "
                "(removed or renamed); this kernel still holds the job: %job kill stops its workers"
            )
        elif job is None:
            status.note = _live.orphan_note(_live.find(str(self.root), name))
        if current:
            self._board.publish(self.layout, status)
        return status

    def _status_while_attaching(self) -> JobStatus | None:
        """While the background attach runs: the current context's job as its plain files and
        /proc describe it (``%load_ext``'s line), without waiting; published once attached."""
        name = self.context
        path = self.store.state_path(name)
        try:
            info = os.stat(path)
        except OSError:
            return None
        status = _local_records.status_from_files(self.layout, name, info)
        if status is None or status.services:
            return None  # its services' addresses are known once connected
        status.cache_path = os.path.relpath(path, self.root)
        status.note = "attaching in the background: this is what its files and /proc say"
        return status

    def _describe(self, name: str, job: Any, state: Any) -> JobStatus:
        store = self.store
        label = self._attachment.label if (job is None or state is not None) else None
        return describe(
            name,
            job,
            state,
            state_path=store.state_path(name),
            root=self.root,
            spec=store.saved_spec(name) or label,
        )

    # ── apply ───────────────────────────────────────────────────────────
    def resolve(self, spec: Spec | None, namespace: Mapping[str, Any] | None = None) -> Resolved:
        """Turn a spec (None: the context's saved one) into ``(job, saved_path_or_None, label)``."""
        if spec is None:
            saved = self.layout.read_spec(self.context, trusted=True)  # it leads to an import
            if saved is None:
                raise SpecError(
                    f"context '{self.context}' has no saved spec: "
                    "run %job apply --local hosts=2 (or module.attr, or a variable name)"
                )
            from .specs.parse import spec_from_saved

            spec = spec_from_saved(saved)
        from .resolve import resolve

        return resolve(spec, self.root, namespace)

    @cache.locked_method
    def apply(self, spec: Spec | None = None, namespace: Mapping[str, Any] | None = None) -> ApplyResult:
        """Apply ``spec`` in the current context (a no-op when the running job can run it).

        The new job is started, connected and recorded before the old one is
        touched: if it fails, the previous job and its cache stay as they were.
        """
        job, saved_path, label = self.resolve(spec, namespace)
        name = self.context
        engine = engine_for(job)
        _log.get(__name__).debug(
            "apply %s in context %s: %s, engine %s", label, name, type(job).__name__, type(engine).__name__
        )
        engine_notes = engine.prepare(job)  # fix the spec before can_run is asked (SSH: -tt)
        engine_notes += services.loopback(job)  # no service port open to other machines
        attachment = self._check_attachment()
        # Workers of an earlier apply that never completed are reaped first: none is orphaned.
        notes = [_orphans.reaped_line(_orphans.reap_leftovers(self.layout.dir)), *engine_notes]
        old = self._replaced_job(attachment, name, notes, bare=spec is None)
        if lifecycle.reusable(old, job):
            if not attachment.connected:
                self._remember(old, self.loop.call(lifecycle.connect, old))
            self.store.save_spec(name, saved_path)
            self._attachment.label = label
            return ApplyResult(self.status(), changed=False)
        done = self._replace(job, old, engine, name, saved_path, label)
        if done.kill_failed:
            notes.append(
                f"killing the previous job {done.replaced_apply_id} failed ({done.kill_failed}): "
                "it may still be running"
            )
        if saved_path is None:
            notes.append(
                "this spec lives only in this kernel; the CLI and a bare %job apply cannot re-create it"
            )
        return ApplyResult(
            self.status(),
            changed=True,
            replaced_apply_id=done.replaced_apply_id,
            note="; ".join(filter(None, notes)) or None,
        )

    def _replaced_job(self, attachment: Attachment, name: str, notes: list[str | None], bare: bool) -> Any:
        """The job an apply replaces: the connected one, else the cached one (a CacheError is one
        line and touches nothing). A cache this kernel will not use (unreadable, unsigned, another
        user's) is never unpickled: an apply of a SPEC moves it aside, noted, and it counts as
        none; a bare apply, which would re-apply through it, says which SPEC to give instead."""
        if attachment.connected:
            return attachment.job
        try:
            return self.store.load()
        except cache.UnusableCacheError as error:
            if bare:
                saved = self.store.saved_spec(name)
                hint = f"%job apply {saved}" if saved else "%job apply --local hosts=2"
                raise SpecError(f"{error}. Give the spec to apply, e.g. {hint}") from None
            notes.append(self._move_aside(name))
            return None

    def _replace(
        self, job: Any, old: Any, engine: Engine, name: str, saved_path: str | None, label: str
    ) -> lifecycle.Replaced:
        """Start ``job``, record it, then kill ``old`` (:func:`lifecycle.replace`), with the
        engine's checks that start nothing first and the workers this apply spawns recorded as
        they start, so an apply that never completes (interrupted, kernel killed) orphans none."""
        store = self.store

        def commit(state: Any) -> None:
            store.save(name, job, saved_path)
            self._remember(job, state)
            self._attachment.label = label

        log = engines.apply_log(self.layout.dir / name)
        _log.get(__name__).debug("engine step before_start (%s), then start, record, kill the old", log)
        engine.before_start(job, log)
        guard = _orphans.ApplyGuard(self.layout.context_dir(name), job)
        try:
            done = lifecycle.replace(
                job, old, label=label, call=self.loop.call, commit=commit, guard=guard, log=log, engine=engine
            )
        except KeyboardInterrupt:
            guard.abandoned.set()  # the loop's worker stops spawning and kills what it started
            _log.get(__name__).debug("apply interrupted: engine step interrupt")
            engine.interrupt(job)  # unblock a pending Slurm allocation / SSH readiness wait
            raise
        except BaseException:
            guard.done()  # the failed start (or the unrecordable new job) was reaped
            raise
        guard.done()  # the workers are in the cache now
        return done

    def _move_aside(self, name: str) -> str:
        """Move the context's unusable cache aside (never delete it, never unpickle it); say where
        it went and whose it was, and what of its workers may still run: only this user's own live
        record (processes of theirs, start times matched) is acted on, never the cache itself."""
        path = self.store.state_path(name)
        whose = cache.describe(path)
        moved = cache.quarantine(path)
        line = (
            f"moved the unusable {os.path.relpath(path, self.root)} ({whose}) aside to "
            f"{os.path.relpath(moved, self.root)}"
        )
        stopped = self._stop_recorded(name)
        if stopped:
            return f"{line}; stopped {len(stopped)} worker(s) your own record of it listed: pid " + _pids(
                stopped
            )
        return (
            f"{line}; it was not loaded, so any workers it describes were not signalled, and none of "
            "yours is recorded running for this context"
        )

    # ── kill / reconnect ───────────────────────────────────────────────
    @cache.locked_method
    def kill(self, context: str | None = None, before: Callable[[], None] | None = None) -> JobStatus:
        """Reap the context's workers and delete its state file (as ``monarch kill``);
        ``before()`` (stopping the context's runs) is called first, under the same lock."""
        _faults.expect_ends()  # the procs and workers that end now are no faults to announce
        name = check_name(context) if context else self.context
        if context and not self.layout.exists(name):
            raise NoJobError(f"no context '{name}' here: %job context ls lists them")
        current = name == self.context
        store = self.store
        quick = self._killable(name, store) if current and not self._attachment.connected else None
        if before is not None:
            before()
        if quick is not None:
            return self._kill_from_records(quick, name, store)
        attachment = self._check_attachment()
        try:
            job = attachment.job if (current and attachment.connected) else store.load(name)
        except cache.UnusableCacheError:  # recoverable from the notebook: the file is kept aside
            after = JobStatus(context=name, state=NO_JOB, note=self._move_aside(name))
            self._board.publish(self.layout, after)
            return after
        if job is None:
            return self._kill_recorded(name, store)
        before_status = self._describe(name, job, attachment.state if current else None)
        failed = self.loop.call(lifecycle.kill_error, job)
        if failed:
            raise MonarchJupyterError(
                f"killing the job of context '{name}' failed ({failed}); "
                f"its cache was kept so %job kill can try again"
            )
        store.remove(name)
        _live.forget(str(self.root), name)
        if current:
            self._clear_attachment()
        after = JobStatus(context=name, state=NO_JOB, spec=before_status.spec)
        self._board.publish(self.layout, after)
        return before_status

    def _killable(self, name: str, store: JobStore) -> _local_records.Killable | None:
        """A local job its records vouch for (see ``_local_records``), with the background
        attach called off; None (the ordinary kill) when there is none or the attach began."""
        found = _local_records.killable(self.layout, store.state_path(name), name)
        if found is None or (self.background is not None and not self.background.cancel()):
            return None
        return None if self.ready_hook is not None else found

    def _kill_from_records(self, found: _local_records.Killable, name: str, store: JobStore) -> JobStatus:
        """Kill a local job from its records, without unpickling it or importing Monarch."""
        _log.get(__name__).debug("kill from records: pid %s", sorted(found.workers))
        _local_records.kill(found)
        store.remove(name)
        after = JobStatus(context=name, state=NO_JOB, spec=found.status.spec)
        self._board.publish(self.layout, after)
        return found.status

    def _stop_recorded(self, name: str) -> list[int]:
        """Stop the context's workers this user's own live record lists (processes of theirs,
        start times matched; see ``system/live``), never anything a cache says; the PIDs stopped."""
        found = _live.find(str(self.root), name)
        return _live.stop(found) if found is not None and found.alive() else []

    def _kill_recorded(self, name: str, store: JobStore) -> JobStatus:
        """``%job kill`` with no cache: the workers of a job whose cache is gone (see ``_live``)."""
        stopped = self._stop_recorded(name)
        if not stopped:
            raise NoJobError(f"no job to kill in context '{name}' ({store.state_path(name)} does not exist)")
        after = JobStatus(
            context=name,
            state=NO_JOB,
            note=f"stopped {len(stopped)} worker(s) of a job whose cache was gone: pid {_pids(stopped)}",
        )
        self._board.publish(self.layout, after)
        return after

    @cache.locked_method
    def trust(self) -> tuple[str, JobStatus]:
        """Sign the current context's cache as this user's own (see ``_signing``), then attach:
        the deliberate step for a cache our kernels did not write (``monarch apply`` in a
        terminal). Returns who owns the file and when it was written, and the status."""
        path = self.store.state_path()
        if not path.exists():
            raise NoJobError(f"no job cache to trust in context '{self.context}' ({path} does not exist)")
        what = cache.trust(path)
        self._clear_attachment()
        self._cached_place = None
        return what, self.attach()

    def refresh_mounts(self) -> int:
        """Re-sync the running job's remote mounts with their sources; how many there are."""
        from .services import mounts

        return int(self.loop.call(mounts.refresh, self.job(), self.state()))

    def reconnect(self) -> JobStatus:
        """Drop the cached connection and attach again from the pickle."""
        self._clear_attachment()
        return self.attach()

    # ── contexts ────────────────────────────────────────────────────────
    def contexts(self) -> list:
        return self.layout.infos()

    @cache.locked_method
    def use(self, name: str) -> JobStatus:
        check_name(name)
        self._clear_attachment()
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
        if self.store.state_path(name).exists():
            killed = self.kill(name)
        if name == self.context:
            self._clear_attachment()
        self.layout.remove(name)
        return killed

    # ── what user code and %%remote use ─────────────────────────────────
    def job(self) -> Any:
        """The attached JobTrait of the current context (attaching if needed)."""
        self._require_attached()
        return self._attachment.job

    def state(self) -> Any:
        """The JobState (host meshes) of the current context's running job."""
        self._require_attached()
        return self._attachment.state

    def running(self) -> tuple[Any, Any, str, str]:
        """``(job, state, folder, context)`` of the current context's running job, from one
        look at the folder (each look is a getcwd and two stats; a ``%%remote`` run needs
        all four, and asking for them one by one looked three times)."""
        self._require_attached()
        place = self._cached_place  # just checked against the folder's fingerprint
        assert place is not None  # set by the attachment check above
        return self._attachment.job, self._attachment.state, place.key[0], place.context

    def host_meshes(self) -> dict[str, Any]:
        """Mesh name → HostMesh of the running job, in spec order."""
        return _introspect.host_meshes(self.state())

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


def _pids(pids: list[int]) -> str:
    return ", ".join(map(str, pids))
