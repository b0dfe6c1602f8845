"""Importable local job specs, so the ``monarch`` CLI can re-apply ``%job apply --local``.

``monarch_jupyter.local_jobs.hosts_2`` is ``ProcessJob({"hosts": 2})`` and
``monarch_jupyter.local_jobs.trainers_2__loaders_1`` is
``ProcessJob({"trainers": 2, "loaders": 1})``; ``hosts_2__telemetry`` (``--telemetry``) is
``hosts_2`` with Monarch's telemetry (and mesh admin, on loopback) enabled.
"""

from __future__ import annotations

from typing import Any

from .specs.local import parse_local_attr, split_services


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    attr, services = split_services(name)
    meshes = parse_local_attr(attr)
    from monarch.job import ProcessJob

    from .services import configure

    return configure(ProcessJob(meshes), services)
