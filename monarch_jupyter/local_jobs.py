"""Importable local job specs, so the ``monarch`` CLI can re-apply ``%job apply --local``.

``monarch_jupyter.local_jobs.hosts_2`` is ``ProcessJob({"hosts": 2})`` and
``monarch_jupyter.local_jobs.trainers_2__loaders_1`` is
``ProcessJob({"trainers": 2, "loaders": 1})``; ``hosts_2__telemetry`` (``--telemetry``) is
``hosts_2`` with Monarch's telemetry (and mesh admin, on loopback) enabled;
``hosts_2__mount_X2fwork…`` mounts ``/work…`` on the workers (``--mount``, see :mod:`.jobs.specs.mounts`).
"""

from __future__ import annotations

from typing import Any

from .jobs.specs.local import from_attr


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    spec = from_attr(name)
    from .jobs.resolve import local_job

    return local_job(spec)
