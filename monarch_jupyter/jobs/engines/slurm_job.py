"""``monarch_jupyter.slurm.SlurmJob``: Monarch's SlurmJob, working on Slurm 22.05 too.

Use it exactly like ``monarch.job.SlurmJob`` (same arguments)::

    from monarch_jupyter.slurm import SlurmJob
    job = SlurmJob({"hosts": 1}, python_exe="/path/to/python", exclusive=False)

What it changes, and why:

- ``squeue --job N --json`` on Slurm 22.05 (Debian 12's only version) lists every
  job and shapes ``job_state`` (a string) and ``job_resources.nodes`` (a host list
  string, with ``allocated_nodes``) differently from the newer JSON Monarch
  parses. We pick job N and normalise both shapes to the newer one.
- Waiting for a pending allocation polls every 0.5 s instead of 2 s, reports
  "queued as Slurm job N (pending: Resources, 12 s)" now and then, and stops at
  once when :meth:`cancel` is called (Ctrl-C in the apply cell): the job is
  ``scancel``-ed, nothing stays queued.
- Monarch's Slurm logger prints INFO lines to stderr with its own handler; we keep
  its warnings only.
- Where this machine's hostname resolves only to loopback (a one-machine test
  cluster), the client listens on 127.0.0.1 instead of panicking.

Nothing touches the user's PATH: ``sbatch``/``squeue``/``scancel`` are the ones
Monarch would run.
"""

from __future__ import annotations

import json
import logging
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from monarch.job import SlurmJob as _MonarchSlurmJob

from ...runtime import log as _log
from . import transport
from .slurm import SLURM_JOB_MODULE

POLL = 0.5
PROGRESS_EVERY = 5.0


class _WarningsOnly(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or _log.debug_on()


logging.getLogger("monarch._src.job.slurm").addFilter(_WarningsOnly())


class ApplyCancelled(RuntimeError):
    """The apply was cancelled while the allocation was pending; it was scancel-ed."""


def _hostnames(nodes: str) -> list[str]:
    if not nodes:
        return []
    try:
        out = subprocess.run(
            ["scontrol", "show", "hostnames", nodes], capture_output=True, text=True, timeout=20
        )
        names = out.stdout.split()
        if out.returncode == 0 and names:
            return names
    except (OSError, subprocess.TimeoutExpired):
        pass
    return [n for n in nodes.split(",") if n]


def normalise(job: dict[str, Any]) -> dict[str, Any]:
    """One squeue --json job record in the shape Monarch 0.7 parses (newer Slurm)."""
    job = dict(job)
    state = job.get("job_state", [])
    job["job_state"] = [state] if isinstance(state, str) else list(state or [])
    resources = dict(job.get("job_resources") or {})
    nodes = resources.get("nodes")
    if isinstance(nodes, str) or nodes is None:
        allocated = resources.get("allocated_nodes")
        if (
            isinstance(allocated, list)
            and allocated
            and all(isinstance(n, dict) and "nodename" in n for n in allocated)
        ):
            names = [n["nodename"] for n in allocated]
        else:
            names = _hostnames(nodes or "")
        resources["nodes"] = {"allocation": [{"name": n} for n in names]}
    job["job_resources"] = resources
    return job


class SlurmJob(_MonarchSlurmJob):
    """Monarch's SlurmJob, compatible with Slurm 22.05's JSON and cancellable while pending."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _loopback_transport()

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        _loopback_transport()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_cancel_event", None)
        state.pop("_progress", None)
        return state

    def report_to(self, progress: Callable[[str], None] | None) -> None:
        """Where "queued as Slurm job N …" lines go while this job waits for its allocation
        (set by the Slurm engine for the apply cell; never pickled)."""
        self.__dict__["_progress"] = progress

    @property
    def _cancel(self) -> threading.Event:
        event = self.__dict__.get("_cancel_event")
        if event is None:
            event = self.__dict__["_cancel_event"] = threading.Event()
        return event

    def cancel(self) -> None:
        """From another thread: stop waiting for the allocation and scancel it."""
        self._cancel.set()
        job_id = self._slurm_job_id
        if job_id is not None:
            subprocess.run(["scancel", job_id], capture_output=True, text=True, timeout=20)

    def _create(self, client_script: str | None) -> None:
        self._cancel.clear()
        super()._create(client_script)
        if self._cancel.is_set():  # interrupted while sbatch ran
            self._kill()
            raise ApplyCancelled("cancelled while submitting; the Slurm job was scancel-ed")

    def _get_job_info_json(self, job_id: str) -> dict[str, Any] | None:
        try:
            result = subprocess.run(
                ["squeue", "--job", job_id, "--json"], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            logging.getLogger("monarch._src.job.slurm").warning("squeue failed: %s", error)
            return None
        if result.returncode != 0 or not result.stdout.strip():
            return None
        try:
            jobs = json.loads(result.stdout).get("jobs", [])
        except (json.JSONDecodeError, AttributeError):
            return None
        for job in jobs:  # 22.05 ignores --job with --json and lists every job
            if str(job.get("job_id")) == str(job_id):
                return normalise(job)
        return None

    def _wait_for_job_start(self, job_id: str, expected_nodes: int, timeout: int | None = None) -> list[str]:
        start = time.monotonic()
        noted: float | None = None
        try:
            while timeout is None or time.monotonic() - start < timeout:
                if self._cancel.is_set():
                    raise ApplyCancelled(f"cancelled while Slurm job {job_id} was pending; it was scancel-ed")
                info = self._get_job_info_json(job_id)
                if not info:
                    raise RuntimeError(f"Slurm job {job_id} is no longer in the queue")
                states = info["job_state"]
                if "RUNNING" in states:
                    names = [n["name"] for n in info["job_resources"]["nodes"]["allocation"]]
                    if len(names) != expected_nodes:
                        raise RuntimeError(
                            f"Slurm job {job_id} got {len(names)} nodes, expected {expected_nodes}"
                        )
                    return names
                if any(s in states for s in ("FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "COMPLETED")):
                    raise RuntimeError(f"Slurm job {job_id} ended while starting: {'/'.join(states)}")
                now = time.monotonic()
                progress = self.__dict__.get("_progress")
                if progress is not None and (noted is None or now - noted >= PROGRESS_EVERY):
                    reason = info.get("state_reason") or "-"
                    hint = ""
                    if reason == "Resources" and noted is not None:
                        hint = (
                            "; if your previous job holds the nodes: Ctrl-C (it is scancel-ed), "
                            "%job kill, then apply again"
                        )
                    progress(
                        f"queued as Slurm job {job_id} ({'/'.join(states).lower()}: {reason}, "
                        f"{int(now - start)} s){hint}"
                    )
                    noted = now
                self._cancel.wait(POLL)
            raise RuntimeError(f"Slurm job {job_id} did not start within {timeout} s")
        except BaseException:
            self._kill()
            raise


# Caches pickle the class by reference and the Slurm engine claims jobs by this module: the
# persisted path (the shim monarch_jupyter/slurm.py re-exports it), not where the code lives.
SlurmJob.__module__ = SLURM_JOB_MODULE


def _loopback_transport() -> None:
    """On a machine whose hostname resolves only to loopback, listen on 127.0.0.1 (one-node cluster)."""
    if transport.hostname_is_loopback_only():
        transport.listen_on_loopback()
