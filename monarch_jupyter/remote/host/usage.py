"""What a run's ranks use on this host: CPU % and RSS of each rank's process group (``/proc``),
and GPU memory of its processes where ``nvidia-smi`` is present. Plain data for ``%remote runs``.

Sampled only when asked (two looks ``interval`` seconds apart): nothing runs while nobody looks.
The GPU path (:func:`parse_compute_apps`) is unit-tested over sample output; it has been run only
where a GPU host exists (none in this project's CI). Standard library only: it travels to the
workers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Any

from ...system import procfs as _procfs
from .dumps import rank_folders
from .runs import leader_alive, leader_pid

NVIDIA_SMI_TIMEOUT = 3.0
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def cpu_ticks(pid: int) -> int:
    """utime + stime of ``pid`` in clock ticks (0 when it is gone)."""
    fields = _procfs.stat_fields(pid)
    try:
        return int(fields[11]) + int(fields[12]) if fields else 0  # proc(5) fields 14, 15
    except (IndexError, ValueError):
        return 0


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def parse_compute_apps(text: str) -> dict[int, int]:
    """``nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader`` → ``{pid: MiB}``
    (a pid on several GPUs: summed; lines it cannot read are skipped)."""
    used: dict[int, int] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2 or not parts[0].isdigit():
            continue
        amount = parts[1].split()
        if not amount or not amount[0].isdigit():
            continue  # "[N/A]", "[Not Supported]"
        used[int(parts[0])] = used.get(int(parts[0]), 0) + int(amount[0])
    return used


def gpu_memory() -> dict[int, int] | None:
    """``{pid: MiB}`` of every compute process on this host's GPUs; None without nvidia-smi."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return None
    try:
        done = subprocess.run(
            [binary, "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_compute_apps(done.stdout) if done.returncode == 0 else None


def runs_usage(
    run_ids: list[str], interval: float = 0.25, mine: dict[str, int] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Each rank of these runs on this host that still runs, by run: ``{"key", "rank", "point",
    "cpu" (% of one core over ``interval``, one look for all), "rss" (bytes), "gpu_mib" (None: no
    nvidia-smi)}``."""
    chosen = [
        (run_id, folder, meta)
        for run_id in run_ids
        for folder, meta in rank_folders(run_id, None, None, mine)
        if leader_alive(meta)
    ]
    leaders = {leader_pid(meta) or 0 for _, _, meta in chosen}
    members = _procfs.group_members(leaders) if leaders else {}
    before = {pid: cpu_ticks(pid) for pids in members.values() for pid in pids}
    start = time.monotonic()
    if chosen:
        time.sleep(interval)
    elapsed = max(time.monotonic() - start, 1e-3)
    gpus = gpu_memory() if chosen else None
    answers: dict[str, list[dict[str, Any]]] = {run_id: [] for run_id in run_ids}
    for run_id, _, meta in chosen:
        pids = members.get(leader_pid(meta) or 0, [])
        ticks = sum(max(0, cpu_ticks(p) - before.get(p, 0)) for p in pids)
        answers[run_id].append(
            {
                "key": meta.get("key"),
                "rank": meta.get("rank"),
                "point": meta.get("point") or {},
                "cpu": round(100.0 * ticks / _TICK / elapsed, 1),
                "rss": sum(rss_bytes(p) for p in pids),
                "gpu_mib": None if gpus is None else sum(gpus.get(p, 0) for p in pids),
            }
        )
    return answers
