"""The job sidecar (Monarch's telemetry store, dashboard and mount client) in its own session.

Monarch starts the sidecar in the kernel's process group, so a kernel restart kills it and
the telemetry collected so far. :func:`start` starts it first, under Monarch's own lock and
key, as :mod:`._sidecar_main`, which leaves the kernel's session and binds the dashboard on
loopback before running Monarch's sidecar; Monarch then finds it and uses it.
"""

from __future__ import annotations

from typing import Any

from ...runtime import introspect as _introspect

#: What the sidecar process runs (``python -m``).
MODULE = "monarch_jupyter.jobs.services._sidecar_main"


def needs_sidecar(job: Any) -> bool:
    """Whether ``job`` runs a sidecar (telemetry or mounts)."""
    services = _introspect.job_services(job)
    return "telemetry" in services or "mounts" in services


def start(job: Any) -> int | None:
    """Start ``job``'s sidecar in its own session unless one runs for its apply id; its PID.

    ``job`` must be applied (it has an apply id) and not yet connected."""
    apply_id = getattr(job, "apply_id", None)
    if not isinstance(apply_id, str) or not needs_sidecar(job):
        return None
    return _introspect.sidecar_pid(apply_id) or _introspect.spawn_sidecar(apply_id, MODULE)


def pid(job: Any) -> int | None:
    """The PID of ``job``'s sidecar while it runs, else None."""
    apply_id = getattr(job, "apply_id", None)
    return _introspect.sidecar_pid(apply_id) if isinstance(apply_id, str) else None
