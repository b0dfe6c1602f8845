"""Lost or only silent: whether a rank that stopped talking is gone, from plain facts (pure: no
Monarch, no threads, no /proc; the caller looks and passes the clock).

A rank is lost only on evidence that its worker is gone: the worker's (or the rank's proc's)
process is dead, or a probe of the rank's actor failed (the call raised; Monarch's supervision
reports a dead proc that way). Silence alone never loses a rank: a starved machine, a GC pause
or swap delays a live rank's messages by seconds, and a loss kills its process. A rank silent
past :meth:`SilenceWatch.threshold` is reported, one line per group of ranks alike::

    hosts=7 silent for 12 s (worker alive)

and reported again each time its silence doubles.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

SILENT_AFTER = 5.0  # seconds: a running rank silent this long is reported (its actor heartbeats every 0.5 s)
SILENCE_FACTOR = 3.0  # … or this many times the longest silence a rank of the run came back from
SILENCE_CAP = 60.0  # … but never later than this
FAULT_SILENT_AFTER = 1.5  # … this soon once Monarch reported a fault (the silent ranks are probed)

ALIVE = "alive"  # the worker's process runs
STOPPED = "stopped"  # … exists but is stopped (SIGSTOP, a tracer): it answers nothing until continued
GONE = "gone"  # … is dead (or a zombie)
UNKNOWN = "unknown"  # not on this machine: only a probe can tell


@dataclass(frozen=True)
class Evidence:
    """What is known of one rank's worker right now."""

    worker: str = UNKNOWN  # ALIVE / STOPPED / GONE / UNKNOWN, from its process
    pid: int | None = None  # the process that was looked at
    probe_failed: str | None = None  # why a probe of the rank's actor failed (None: none failed)
    probing: bool = False  # a probe is out and has not answered yet
    cause: str = ""  # how the process ended, when this machine can tell (``killed by SIGKILL``)


def lost_reason(evidence: Evidence) -> str | None:
    """Why the rank is lost, or None: it is not (whatever its silence)."""
    if evidence.worker == GONE:
        died = f"worker process {evidence.pid} died" if evidence.pid else "worker process died"
        return f"{died} ({evidence.cause})" if evidence.cause else died
    if evidence.probe_failed:
        return f"worker failed a probe ({evidence.probe_failed})"
    return None


def probe_failure(kind: str, text: str) -> str | None:
    """What a probe that raised ``kind`` with ``text`` proves: why the worker is gone, or None
    when it only timed out (no answer is no evidence on a starved machine)."""
    if "timeout" in kind.lower():
        return None
    first = text.strip().splitlines()[0][:200] if text.strip() else ""
    return f"{kind}: {first}" if first else kind


def silent_note(evidence: Evidence) -> str:
    """What the silent rank's worker is doing, for the silence line (in parentheses)."""
    if evidence.worker == STOPPED:
        return f"worker stopped (SIGSTOP): kill -CONT {evidence.pid}"
    if evidence.worker == ALIVE:
        return "worker alive"
    return "probing the worker" if evidence.probing else "worker answers probes"


def silent_for(seconds: float) -> str:
    """``12 s``, ``3 min``."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


class SilenceWatch:
    """When each running rank was last heard of, and which silences are due to be reported."""

    def __init__(self, indices: Iterable[int], now: float) -> None:
        self.heard: dict[int, float] = dict.fromkeys(indices, now)
        self.longest_gap = 0.0  # the longest any rank was silent before it was heard again
        self.fault = False  # Monarch reported a fault during the run: report (and probe) sooner
        self._reported: dict[int, float] = {}  # rank → the silence it was last reported at

    def threshold(self) -> float:
        """The silence from which a running rank is reported (and its worker probed)."""
        if self.fault:
            return FAULT_SILENT_AFTER
        return min(SILENCE_CAP, max(SILENT_AFTER, SILENCE_FACTOR * self.longest_gap))

    def hear(self, index: int, now: float) -> float | None:
        """Rank ``index`` was heard from at ``now``; its silence when it had been reported silent."""
        gap = now - self.heard.get(index, now)
        self.longest_gap = max(self.longest_gap, gap)
        self.heard[index] = now
        return gap if self._reported.pop(index, None) is not None else None

    def drop(self, index: int) -> None:
        """The rank ended (or was lost): it is watched no more."""
        self.heard.pop(index, None)
        self._reported.pop(index, None)

    def reset(self, now: float) -> None:
        """Every rank counts as heard at ``now`` (the caller itself held the messages up)."""
        self.heard = dict.fromkeys(self.heard, now)

    def silent(self, now: float) -> dict[int, float]:
        """The ranks silent past the threshold, with their silence."""
        limit = self.threshold()
        return {i: now - t for i, t in self.heard.items() if now - t >= limit}

    def due(self, now: float) -> dict[int, float]:
        """The silent ranks to report now: newly silent, or silent twice as long as when last
        reported (marked reported)."""
        out = {}
        for index, seconds in self.silent(now).items():
            last = self._reported.get(index)
            if last is None or seconds >= 2 * last:
                self._reported[index] = seconds
                out[index] = seconds
        return out
