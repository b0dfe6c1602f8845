"""What ``%job apply`` was asked to apply: parsing and naming, no Monarch import.

A spec is one of
- ``--local MESH=N[,MESH=N…]``: a ``ProcessJob`` with one worker process per host,
  saved as the importable path ``monarch_jupyter.local_jobs.<mesh>_<n>__…`` so the
  ``monarch`` CLI can re-apply it too;
- ``module.attr``: a JobTrait in a module importable from the notebook's folder
  (as ``monarch apply``);
- ``NAME``: a variable in the notebook holding a JobTrait;
- nothing: the context's saved spec.

:func:`import_attr` turns a ``module.attr`` path into the object it names, the way
``monarch apply`` does; checking that the object is a JobTrait is the caller's job.
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import SpecError

LOCAL_JOBS_MODULE = "monarch_jupyter.local_jobs"
MAX_LOCAL_HOSTS = 256
#: Total worker processes one ``--local`` spec may start (all meshes together);
#: every worker is a Python process on this machine.
MAX_LOCAL_WORKERS = 64
MAX_LOCAL_WORKERS_VAR = "MONARCH_JUPYTER_MAX_LOCAL_WORKERS"


def max_local_workers() -> int:
    """The total bound: ``$MONARCH_JUPYTER_MAX_LOCAL_WORKERS`` if set to a number, else 64."""
    value = os.environ.get(MAX_LOCAL_WORKERS_VAR, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else MAX_LOCAL_WORKERS


def check_total(meshes: dict[str, int]) -> None:
    """Raise SpecError when the meshes add up to more workers than the bound."""
    total, bound = sum(meshes.values()), max_local_workers()
    if total > bound:
        raise SpecError(
            f"--local asks for {total} worker processes in all, more than the bound of {bound} "
            f"on this machine; to raise it deliberately: %env {MAX_LOCAL_WORKERS_VAR}={total}"
        )

_MESH = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$")


@dataclass(frozen=True)
class LocalSpec:
    """A local multi-host ProcessJob: mesh name → host count (order kept)."""

    meshes: tuple[tuple[str, int], ...]

    @property
    def path(self) -> str:
        return f"{LOCAL_JOBS_MODULE}.{local_attr(dict(self.meshes))}"

    def describe(self) -> str:
        return "--local " + ",".join(f"{m}={n}" for m, n in self.meshes)


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


def parse_meshes(text: str) -> LocalSpec:
    """Parse ``hosts=2,trainers=4`` into a LocalSpec."""
    meshes: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, count = item.partition("=")
        name, count = name.strip(), count.strip()
        if sep and len(count.split()) > 1:
            word = count.split()[1]
            raise SpecError(
                f"unexpected word {word!r} after {name}={count.split()[0]}; "
                "separate meshes with commas: --local hosts=2,trainers=4"
            )
        if not sep or not count:
            raise SpecError(f"--local wants MESH=N, got {item!r} (e.g. --local hosts=2)")
        if not _MESH.match(name):
            raise SpecError(
                f"invalid mesh name {name!r}: start with a letter; letters, digits and single '_'"
            )
        if not count.isdigit() or not 1 <= int(count) <= MAX_LOCAL_HOSTS:
            raise SpecError(f"host count for {name!r} must be 1..{MAX_LOCAL_HOSTS}, got {count!r}")
        if name in meshes:
            raise SpecError(f"mesh {name!r} is given twice")
        meshes[name] = int(count)
    if not meshes:
        raise SpecError("--local wants at least one MESH=N (e.g. --local hosts=2)")
    check_total(meshes)
    return LocalSpec(tuple(meshes.items()))


def local_attr(meshes: dict[str, int]) -> str:
    """``{"hosts": 2, "trainers": 1}`` → ``hosts_2__trainers_1``."""
    return "__".join(f"{name}_{count}" for name, count in meshes.items())


def parse_local_attr(attr: str, bounded: bool = True) -> dict[str, int]:
    """Inverse of :func:`local_attr`; raises AttributeError for anything else
    (including, when ``bounded``, more workers in all than :func:`max_local_workers`)."""
    meshes: dict[str, int] = {}
    for part in attr.split("__"):
        name, _, count = part.rpartition("_")
        if not name or not _MESH.match(name) or not count.isdigit():
            raise AttributeError(attr)
        meshes[name] = int(count)
    if not meshes or any(not 1 <= n <= MAX_LOCAL_HOSTS for n in meshes.values()):
        raise AttributeError(attr)
    if bounded and sum(meshes.values()) > max_local_workers():
        raise AttributeError(f"{attr}: more than {max_local_workers()} workers (${MAX_LOCAL_WORKERS_VAR})")
    return meshes


def parse_apply(line: str) -> Spec | None:
    """Parse the arguments of ``%job apply``; None means "the saved spec"."""
    try:
        words = shlex.split(line)
    except ValueError as error:
        raise SpecError(f"cannot parse {line!r}: {error}") from None
    if not words:
        return None
    first, rest = words[0], words[1:]
    if first == "--ssh" or first.startswith("--ssh="):  # SSH: see ssh_specs
        from .ssh_specs import parse as parse_ssh

        return parse_ssh(words)
    if first == "--local" or first.startswith("--local="):
        value = first.partition("=")[2] if "=" in first else " ".join(rest)
        if first == "--local":
            rest = []
        if rest:
            raise SpecError(f"unexpected words after the spec: {' '.join(rest)!r}")
        return parse_meshes(value)
    if first.startswith("-"):
        raise SpecError(
            f"unknown option {first!r}: %job apply takes --local MESH=N, --ssh MESH=HOSTS, module.attr or a variable name"
        )
    if rest:
        raise SpecError(f"unexpected words after the spec: {' '.join(rest)!r}")
    if _DOTTED.match(first):
        return ModuleSpec(first)
    if _IDENT.match(first):
        return VariableSpec(first)
    raise SpecError(f"{first!r} is not a spec: give --local MESH=N, module.attr or a variable name")


def spec_from_saved(text: str) -> Spec:
    """The saved ``spec`` file text as a Spec (local paths become LocalSpec)."""
    prefix = LOCAL_JOBS_MODULE + "."
    if text.startswith(prefix):
        try:
            meshes = parse_local_attr(text[len(prefix) :], bounded=False)
        except AttributeError:
            pass
        else:
            check_total(meshes)
            return LocalSpec(tuple(meshes.items()))
    if text.startswith("monarch_jupyter.ssh_jobs."):  # SSH: see ssh_specs
        from .ssh_specs import from_attr

        try:
            return from_attr(text.rpartition(".")[2])
        except AttributeError:
            pass
    if not _DOTTED.match(text):
        raise SpecError(f"the saved spec {text!r} is not a module.attr path")
    return ModuleSpec(text)


def import_attr(path: str, folder: str | os.PathLike[str]) -> Any:
    """Import ``module.attr`` from ``folder`` (the notebook's), as ``monarch apply`` does.

    ``folder`` is put first on ``sys.path`` and stays there: a job whose class is
    defined in that module is pickled into the cache, and unpickling it later (a
    status, a re-attach) needs the module importable again. A module already
    imported from ``folder`` is reloaded, so an edited spec file is picked up as a
    fresh CLI run would pick it up.
    """
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
