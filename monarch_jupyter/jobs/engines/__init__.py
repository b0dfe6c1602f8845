"""Engines: what differs between kinds of job around ``%job apply`` and re-attach.

:class:`~.base.Engine` is the interface (prepare, before/after start, output,
interrupt, explain, before/after connect, local_processes, live_workers, is_alive,
workers_are_local); :func:`engine_for` picks the engine of a job: SSH
(:mod:`.ssh`), our Slurm (:mod:`.slurm`), the local ``ProcessJob`` (:mod:`.local`),
else :class:`~.base.OtherEngine`. The engine instances live here for the process's
life and own their state (SSH: the addresses dialled and the apply's cancel event;
a SlurmJob owns its own progress reporter).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

from ...text import timefmt as _timefmt
from .base import Engine, OtherEngine
from .local import LocalEngine
from .slurm import SlurmEngine
from .ssh import SSHEngine

__all__ = ["ENGINES", "Engine", "apply_log", "engine_for", "send_by_value"]

#: In the order they are asked; the last claims every job.
ENGINES: tuple[Engine, ...] = (SlurmEngine(), SSHEngine(), LocalEngine(), OtherEngine())


def engine_for(job: Any) -> Engine:
    """The engine of ``job`` (a JobTrait, cached or connected)."""
    return next(engine for engine in ENGINES if engine.claims(job))


def apply_log(context_dir: Path) -> Path:
    """``.monarch/<context>/apply-<UTC stamp>.log``: the apply's and its workers' full text."""
    return context_dir / f"apply-{_timefmt.utc_stamp(micro=True)}.log"


def send_by_value(module: types.ModuleType) -> None:
    """Pickle ``module``'s code by value, and that of every module of ours it uses, so
    workers need only torchmonarch.

    Monarch pickles actor classes with cloudpickle, by reference when their module is
    importable here; a worker without monarch_jupyter could not import it. What such a
    module may import is the rule stated once in ``monarch_jupyter/remote/host/__init__.py``.
    """
    import cloudpickle

    package = __name__.split(".")[0] + "."
    todo, seen = [module], set()
    while todo:
        current = todo.pop()
        if current.__name__ in seen:
            continue
        seen.add(current.__name__)
        cloudpickle.register_pickle_by_value(current)
        for value in vars(current).values():
            if isinstance(value, types.ModuleType):
                name = value.__name__
            else:
                name = getattr(value, "__module__", None) or ""
            if name.startswith(package) and name not in seen and name in sys.modules:
                todo.append(sys.modules[name])
