"""``%job apply --local MESH=N[,MESH=N…]``: parsing, the bounds, and the saved attr's inverse.

Pure code: no Monarch import.
"""

from __future__ import annotations

import os

from ...errors import SpecError
from . import mounts as mount_flags
from .base import SERVICE_NAMES, LocalSpec, check_mesh_name, is_count, is_mesh_name
from .mounts import Mount

MAX_LOCAL_HOSTS = 256
#: Total worker processes one ``--local`` spec may start (all meshes together);
#: every worker is a Python process on this machine.
MAX_LOCAL_WORKERS = 64
MAX_LOCAL_WORKERS_VAR = "MONARCH_JUPYTER_MAX_LOCAL_WORKERS"


def max_local_workers() -> int:
    """The total bound: ``$MONARCH_JUPYTER_MAX_LOCAL_WORKERS`` if set to a number, else 64."""
    value = os.environ.get(MAX_LOCAL_WORKERS_VAR, "").strip()
    return int(value) if is_count(value) and int(value) > 0 else MAX_LOCAL_WORKERS


def check_total(meshes: dict[str, int]) -> None:
    """Raise SpecError when the meshes add up to more workers than the bound."""
    total, bound = sum(meshes.values()), max_local_workers()
    if total > bound:
        raise SpecError(
            f"--local asks for {total} worker processes in all, more than the bound of {bound} "
            f"on this machine; to raise it deliberately: %env {MAX_LOCAL_WORKERS_VAR}={total}"
        )


def parse_meshes(text: str, services: tuple[str, ...] = (), mounts: tuple[Mount, ...] = ()) -> LocalSpec:
    """Parse ``hosts=2,trainers=4`` into a LocalSpec (with ``services`` switched on and ``mounts``)."""
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
        check_mesh_name(name)
        if not is_count(count) or not 1 <= int(count) <= MAX_LOCAL_HOSTS:
            raise SpecError(f"host count for {name!r} must be 1..{MAX_LOCAL_HOSTS}, got {count!r}")
        if name in meshes:
            raise SpecError(f"mesh {name!r} is given twice")
        meshes[name] = int(count)
    if not meshes:
        raise SpecError("--local wants at least one MESH=N (e.g. --local hosts=2)")
    check_total(meshes)
    mount_flags.check_local(mounts)
    return LocalSpec(tuple(meshes.items()), tuple(name for name in SERVICE_NAMES if name in services), mounts)


def split_services(attr: str) -> tuple[str, tuple[str, ...]]:
    """``hosts_2__telemetry`` → (``hosts_2``, ("telemetry",)); the services are trailing fields."""
    parts = attr.split("__")
    services: list[str] = []
    while parts and parts[-1] in SERVICE_NAMES:
        services.insert(0, parts.pop())
    if len(set(services)) != len(services) or tuple(services) != tuple(
        n for n in SERVICE_NAMES if n in services
    ):
        raise AttributeError(attr)
    return "__".join(parts), tuple(services)


def split_mounts(attr: str) -> tuple[str, tuple[Mount, ...]]:
    """``hosts_2__mount_X2fnb`` → (``hosts_2``, (Mount("mount", "/nb"),)): trailing mount fields."""
    parts = attr.split("__")
    found: list[Mount] = []
    while parts:
        mount = mount_flags.from_field(parts[-1])
        if mount is None:
            break
        found.insert(0, mount)
        parts.pop()
    return "__".join(parts), tuple(found)


def from_attr(attr: str, bounded: bool = True) -> LocalSpec:
    """The LocalSpec a saved ``local_jobs`` attr names (meshes, mounts, services); AttributeError
    for anything else (see :func:`parse_local_attr` for ``bounded``)."""
    rest, services = split_services(attr)
    rest, mounts = split_mounts(rest)
    return LocalSpec(tuple(parse_local_attr(rest, bounded).items()), services, mounts)


def parse_local_attr(attr: str, bounded: bool = True) -> dict[str, int]:
    """Inverse of :func:`~.base.local_attr`; raises AttributeError for anything else
    (including, when ``bounded``, more workers in all than :func:`max_local_workers`)."""
    meshes: dict[str, int] = {}
    for part in attr.split("__"):
        name, _, count = part.rpartition("_")
        if not name or not is_mesh_name(name) or not is_count(count):
            raise AttributeError(attr)
        meshes[name] = int(count)
    if not meshes or any(not 1 <= n <= MAX_LOCAL_HOSTS for n in meshes.values()):
        raise AttributeError(attr)
    if bounded and sum(meshes.values()) > max_local_workers():
        raise AttributeError(f"{attr}: more than {max_local_workers()} workers (${MAX_LOCAL_WORKERS_VAR})")
    return meshes
