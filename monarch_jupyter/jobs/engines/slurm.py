"""Our ``monarch_jupyter.slurm.SlurmJob``: progress while queued, scancel on Ctrl-C.

Duck-typed on the job (``report_to``, ``cancel``) so that importing the engines does not
import Monarch's Slurm module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import Engine, progress

SLURM_JOB_MODULE = "monarch_jupyter.slurm"


class SlurmEngine(Engine):
    workers_are_local = False

    def claims(self, job: Any) -> bool:
        return any(cls.__module__ == SLURM_JOB_MODULE for cls in type(job).__mro__)

    def reach(self, job: Any) -> str:
        return "anyone on the cluster's network (TCP on the allocated nodes; Monarch 0.7 checks no peer)"

    def before_start(self, job: Any, log: Path) -> None:
        job.report_to(progress)  # the job owns its reporter for this apply (never pickled)

    def interrupt(self, job: Any) -> None:
        job.cancel()  # a pending allocation is scancel-ed at once
