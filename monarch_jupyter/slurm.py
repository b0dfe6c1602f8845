"""Persisted path: caches pickle ``monarch_jupyter.slurm.SlurmJob`` by reference, and notebooks
import it from here. The class lives in :mod:`.jobs.engines.slurm_job`; this shim never grows."""

from __future__ import annotations

from .jobs.engines.slurm_job import SlurmJob

__all__ = ["SlurmJob"]
