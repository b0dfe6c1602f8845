"""From a parsed spec to the JobTrait to apply, the path to save and a label to show."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import SpecError
from ..runtime import introspect as _introspect
from .specs.base import LocalSpec, ModuleSpec, Spec, VariableSpec, import_attr


class Resolved(NamedTuple):
    job: Any
    saved_path: str | None  # what the context's spec file records; None: kernel-only
    label: str


def resolve(spec: Spec, root: Path, namespace: Mapping[str, Any] | None = None) -> Resolved:
    """The job ``spec`` names; SpecError (one line) if it names none."""
    if isinstance(spec, LocalSpec):
        return Resolved(local_job(spec), spec.path, spec.describe())
    if isinstance(spec, ModuleSpec):
        job = import_attr(spec.path, root)
        require_job(job, repr(spec.path))
        return Resolved(job, spec.path, spec.describe())  # describe(): e.g. the --ssh form
    if isinstance(spec, VariableSpec):
        if namespace is None or spec.name not in namespace:
            raise SpecError(
                f"no variable {spec.name!r} in the notebook; "
                "give --local MESH=N, module.attr or the name of a JobTrait variable"
            )
        job = namespace[spec.name]
        require_job(job, f"variable {spec.name!r}")
        return Resolved(job, saved_path_for(job), spec.describe())
    raise SpecError(f"unsupported spec {spec!r}")


def local_job(spec: LocalSpec) -> Any:
    """The ProcessJob a ``--local`` spec names, its services and mounts configured."""
    from monarch.job import ProcessJob

    from .services import configure, mounts

    return mounts.configure(configure(ProcessJob(dict(spec.meshes)), spec.services), spec.mounts)


def require_job(obj: Any, what: str) -> None:
    from monarch.job import JobTrait

    if not isinstance(obj, JobTrait):
        raise SpecError(f"{what} is a {type(obj).__name__}, not a Monarch JobTrait")


def saved_path_for(job: Any) -> str | None:
    """An importable spec path equivalent to ``job``, when there is one (a ProcessJob with no
    worker environment, and services and mounts a ``--local`` spec can say)."""
    from monarch.job import ProcessJob

    from .services import mounts, spec_services

    if type(job) is ProcessJob and not _introspect.worker_env(job):
        meshes = _introspect.declared_meshes(job)
        services = spec_services(job)
        said = mounts.spec_mounts(job)
        if meshes is not None and services is not None and said is not None:
            return LocalSpec(tuple(meshes.items()), services, said).path
    return None
