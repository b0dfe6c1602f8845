"""Resources per rank in ``%remote runs``: the hosts' samples (:mod:`.host.usage`) as one line per
running run, a rank idle while the others work flagged as a quiet one is (pure).

    ranks: hosts=0 cpu 98% rss 1.2 GB · hosts=1 cpu 0% rss 310 MB (idle while others work)
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

IDLE_CPU = 1.0  # % of a core: a rank below it is idle …
BUSY_CPU = 10.0  # … when the median of the others is at least this

Sample = Mapping[str, Any]  # one rank, as the host sent it


def merge(answers: Iterable[Mapping[str, Iterable[Sample]]]) -> dict[str, list[Sample]]:
    """Every host's samples by run, each rank once (hosts sharing a machine answer twice), by mesh
    and rank."""
    merged: dict[str, dict[tuple[str, int], Sample]] = {}
    for host in answers:
        for run_id, ranks in host.items():
            for rank in ranks:
                merged.setdefault(run_id, {}).setdefault(
                    (str(rank.get("key")), int(rank.get("rank") or 0)), rank
                )
    return {run_id: [ranks[k] for k in sorted(ranks)] for run_id, ranks in merged.items()}


def idle(samples: list[Sample]) -> set[int]:
    """Positions in ``samples`` of ranks with ~0 % CPU while the others work."""
    found = set()
    for i, sample in enumerate(samples):
        others = [float(s.get("cpu") or 0.0) for j, s in enumerate(samples) if j != i]
        if others and float(sample.get("cpu") or 0.0) < IDLE_CPU and statistics.median(others) >= BUSY_CPU:
            found.add(i)
    return found


def size(value: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit in ("B", "KB") or value >= 100 else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"  # pragma: no cover - the loop returns


def usage_line(samples: list[Sample], labels: Mapping[tuple[str, int], str], limit: int = 16) -> str:
    """``ranks: hosts=0 cpu 98% rss 1.2 GB · …`` (at most ``limit`` ranks, idle ones first)."""
    if not samples:
        return ""
    flagged = idle(samples)
    order = sorted(range(len(samples)), key=lambda i: (i not in flagged, i))
    parts = []
    for i in order[:limit]:
        s = samples[i]
        label = labels.get((str(s.get("key")), int(s.get("rank") or 0)), f"rank {s.get('rank')}")
        text = f"{label} cpu {float(s.get('cpu') or 0):.0f}% rss {size(float(s.get('rss') or 0))}"
        if s.get("gpu_mib") is not None:
            text += f" gpu {s['gpu_mib']} MiB"
        if i in flagged:
            text += " (idle while others work)"
        parts.append(text)
    more = f" · … (+{len(samples) - limit})" if len(samples) > limit else ""
    return "ranks: " + " · ".join(parts) + more
