"""Importable local job specs, so the ``monarch`` CLI can re-apply ``%job apply --local``.

``monarch_jupyter.local_jobs.hosts_2`` is ``ProcessJob({"hosts": 2})`` and
``monarch_jupyter.local_jobs.trainers_2__loaders_1`` is
``ProcessJob({"trainers": 2, "loaders": 1})``.
"""

from __future__ import annotations

from typing import Any

from .specs.local import parse_local_attr


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    meshes = parse_local_attr(name)
    from monarch.job import ProcessJob

    return ProcessJob(meshes)
