"""``ProcessJob`` (``--local``): workers are processes of this machine, keyed ``<mesh>_<i>``."""

from __future__ import annotations

from typing import Any

from ...runtime import introspect as _introspect
from ...system import private_net
from ...system import procfs as _procfs
from .base import Engine, Sizes


class LocalEngine(Engine):
    workers_are_local = True

    def claims(self, job: Any) -> bool:
        return any(
            cls.__name__ == "ProcessJob" and cls.__module__.startswith("monarch.")
            for cls in type(job).__mro__
        )

    def reach(self, job: Any) -> str:
        if private_net.in_private_net():
            return "this kernel only (a private network namespace: abstract sockets stay inside it)"
        return (
            "any user of this machine (Monarch 0.7 checks no peer); "
            f"the {private_net.KERNEL_NAME!r} kernel keeps it to you"
        )

    def local_processes(self, job: Any) -> dict[str, int]:
        return _introspect.worker_pids(job)

    def live_workers(self, job: Any, sizes: Sizes) -> Sizes:
        """A stopped worker (SIGSTOP) is not live: it answers nothing."""
        pids = _introspect.worker_pids(job)
        if not pids:
            return {name: None for name in sizes}
        return {
            name: sum(
                1
                for i in range(size or 0)
                if f"{name}_{i}" in pids
                and _procfs.alive(pids[f"{name}_{i}"])
                and not _procfs.stopped(pids[f"{name}_{i}"])
            )
            for name, size in sizes.items()
        }
