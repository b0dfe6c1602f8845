"""Importable SSH job specs, so the ``monarch`` CLI can re-apply ``%job apply --ssh``.

``monarch_jupyter.ssh_jobs.<attr>`` is the ``SSHJob`` that attr encodes (see
:mod:`monarch_jupyter.jobs.specs.ssh`), always with ``-tt`` in its ssh arguments.
"""

from __future__ import annotations

from typing import Any

from .jobs.specs.ssh import from_attr


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    spec = from_attr(name)
    from .runtime.introspect import ssh_job_class

    job = ssh_job_class()(python_exe=spec.python, ssh_args=spec.ssh_args, monarch_port=spec.port)
    for mesh, hosts in spec.meshes:
        job.add_mesh(mesh, list(hosts))
    return job
