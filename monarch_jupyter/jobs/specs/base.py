"""The kinds of spec ``%job apply`` takes, the one mesh-name rule, and :func:`import_attr`.

A spec is one of
- :class:`LocalSpec` (``--local MESH=N[,MESH=N…]``): a ``ProcessJob`` with one worker
  process per host, saved as ``monarch_jupyter.local_jobs.<mesh>_<n>__…``;
- :class:`ModuleSpec` (``module.attr``): a JobTrait in a module importable from the
  notebook's folder (as ``monarch apply``); ``--ssh`` specs are ModuleSpecs too;
- :class:`VariableSpec` (``NAME``): a variable in the notebook holding a JobTrait;
- nothing (None): the context's saved spec.

Pure code: no Monarch import.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import SpecError
from ...runtime.after_import import holding
from .mounts import Mount

LOCAL_JOBS_MODULE = "monarch_jupyter.local_jobs"
#: Services a ``--local`` spec may switch on (``--telemetry``, ``--admin``); each is written as one
#: more ``__`` field of the saved attr (``hosts_2__telemetry``), which no mesh field can be.
SERVICE_NAMES = ("telemetry", "admin")

# One rule for every mesh name (--local and --ssh): it must survive in an importable
# attr name, where fields are joined by "__".
_MESH = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*$")
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$")


def is_count(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` alone takes full-width digits and superscripts."""
    return text.isascii() and text.isdigit()


def is_mesh_name(name: str) -> bool:
    """Starts with a letter; letters, digits and single ``_`` between them."""
    return bool(_MESH.match(name))


def check_mesh_name(name: str) -> None:
    """SpecError (one line) unless :func:`is_mesh_name`."""
    if not is_mesh_name(name):
        raise SpecError(f"invalid mesh name {name!r}: start with a letter; letters, digits and single '_'")


def local_attr(meshes: dict[str, int], services: tuple[str, ...] = (), mounts: tuple[Mount, ...] = ()) -> str:
    """``{"hosts": 2, "trainers": 1}`` → ``hosts_2__trainers_1``; mounts then services follow as
    ``hosts_2__mount_X2fnb__telemetry`` (see :mod:`.mounts`)."""
    fields = (f"{name}_{count}" for name, count in meshes.items())
    return "__".join([*fields, *(mount.field() for mount in mounts), *services])


@dataclass(frozen=True)
class LocalSpec:
    """A local multi-host ProcessJob: mesh name → host count (order kept)."""

    meshes: tuple[tuple[str, int], ...]
    services: tuple[str, ...] = ()  # of SERVICE_NAMES, in that order
    mounts: tuple[Mount, ...] = ()  # --mount / --gather, in the order given

    @property
    def path(self) -> str:
        return f"{LOCAL_JOBS_MODULE}.{local_attr(dict(self.meshes), self.services, self.mounts)}"

    def describe(self) -> str:
        flags = "".join(f" --{name}" for name in self.services)
        flags += "".join(f" {mount.describe()}" for mount in self.mounts)
        return "--local " + ",".join(f"{m}={n}" for m, n in self.meshes) + flags


@dataclass(frozen=True)
class ModuleSpec:
    """A ``module.attr`` path to a JobTrait."""

    path: str

    def describe(self) -> str:
        return self.path


@dataclass(frozen=True)
class VariableSpec:
    """A notebook variable holding a JobTrait."""

    name: str

    def describe(self) -> str:
        return f"variable {self.name}"


Spec = LocalSpec | ModuleSpec | VariableSpec


def import_attr(path: str, folder: str | os.PathLike[str]) -> Any:
    """Import ``module.attr`` from ``folder`` (the notebook's), as ``monarch apply`` does.

    Our on-import hooks wait meanwhile (:func:`...runtime.after_import.holding`): the module, or
    its attribute (``ssh_jobs``' SSHJob), imports Monarch, and the job's engine may set Monarch's
    transport after, which fails once anything has touched Monarch's runtime.

    ``folder`` is put first on ``sys.path`` and stays there: a job whose class is
    defined in that module is pickled into the cache, and unpickling it later (a
    status, a re-attach) needs the module importable again. A module already
    imported from ``folder`` is reloaded, so an edited spec file is picked up as a
    fresh CLI run would pick it up. Checking that the object is a JobTrait is the
    caller's job.
    """
    with holding():
        return _import_attr(path, folder)


def _import_attr(path: str, folder: str | os.PathLike[str]) -> Any:
    module_name, _, attr = path.rpartition(".")
    folder = str(Path(folder))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    importlib.invalidate_caches()
    try:
        module = sys.modules.get(module_name)
        origin = getattr(module, "__file__", None) or ""
        if module is not None and origin.startswith(folder + os.sep):
            module = importlib.reload(module)
        else:
            module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            raise SpecError(f"no module named {module_name!r} (looked in {folder} and sys.path)") from None
        raise SpecError(f"importing {module_name!r} failed: {error}") from None
    except Exception as error:  # the user's module raised: report it, the kernel lives on
        raise SpecError(f"importing {module_name!r} failed: {type(error).__name__}: {error}") from None
    if not hasattr(module, attr):
        raise SpecError(f"module {module_name!r} has no attribute {attr!r}")
    return getattr(module, attr)
