"""A job's services as the lifecycle sees them: one :class:`Feature` object each (the telemetry
and admin services, the sidecar, the mounts), every step a no-op by default, like ``Engine``.

``jobs/lifecycle.py`` loops over :data:`FEATURES` at each step of a start, a re-attach and a kill
instead of naming each service, so a new service is one class here and one entry in the tuple.
"""

from __future__ import annotations

from typing import Any

from ...runtime import introspect as _introspect
from . import mounts, relay_admin, sidecar
from . import start_refusal as services_refusal
from . import started as services_started


class Feature:
    """One service of a job; each step defaults to doing nothing."""

    def refusal(self, job: Any, workers_local: bool) -> str | None:
        """Why ``job`` cannot be started here with this service (checked before anything starts)."""
        return None

    def before_state(self, job: Any, applying: bool) -> None:
        """Just before Monarch's ``job.state()`` (``applying``: a new job, not a re-attach)."""

    def after_state(self, job: Any) -> None:
        """Once the job is up in this process (after a start or a re-attach)."""

    def explain(self, error: BaseException) -> str | None:
        """A one-line reason for a failed start or kill that this service caused, or None."""
        return None

    def unblock_kill(self, job: Any, workers_local: bool, error: BaseException) -> bool:
        """After a kill failed with ``error``: free what held it; True to ask for the kill again."""
        return False

    def after_kill(self, apply_id: str) -> None:
        """After the job of ``apply_id`` was killed (housekeeping: must not raise)."""


class Services(Feature):
    """Monarch's telemetry and mesh admin (one admin per process in Monarch 0.7)."""

    def refusal(self, job: Any, workers_local: bool) -> str | None:
        return services_refusal(job)

    def before_state(self, job: Any, applying: bool) -> None:
        relay_admin()  # the admin's SQL relay answers any local user: the store refuses it

    def after_state(self, job: Any) -> None:
        services_started(job)


class Sidecar(Feature):
    """The job sidecar, started by us in its own session under Monarch's lock."""

    def before_state(self, job: Any, applying: bool) -> None:
        if applying and sidecar.needs_sidecar(job):
            job.apply()  # the apply id first: the sidecar is keyed by it
        sidecar.start(job)  # the telemetry store lives on in its own session

    def after_kill(self, apply_id: str) -> None:
        _introspect.remove_sidecar_files(apply_id)  # the lock record and log Monarch leaves in /tmp


class Mounts(Feature):
    """``--mount`` / ``--gather``: FUSE on the workers and here."""

    def refusal(self, job: Any, workers_local: bool) -> str | None:
        return mounts.start_refusal(job, workers_local)

    def explain(self, error: BaseException) -> str | None:
        return mounts.explain(error)

    def unblock_kill(self, job: Any, workers_local: bool, error: BaseException) -> bool:
        # Monarch gives up on a busy mount (a shell whose folder is in it): unmount ours lazily
        busy = mounts.here(job, workers_local) if mounts.explain(error) else []
        return bool(mounts.unmount_lazily(busy))


#: In the order their steps run.
FEATURES: tuple[Feature, ...] = (Services(), Sidecar(), Mounts())


def refusal(job: Any, workers_local: bool) -> str | None:
    return next((line for f in FEATURES if (line := f.refusal(job, workers_local)) is not None), None)


def explain(error: BaseException) -> str | None:
    return next((line for f in FEATURES if (line := f.explain(error)) is not None), None)
