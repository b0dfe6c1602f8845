"""Monarch mesh faults, recorded instead of exiting the kernel.

Monarch's default ``unhandled_fault_hook`` calls ``sys.exit`` in the client when
a proc it spawned dies; in a kernel that surfaces as a KeyboardInterrupt in
whatever cell is running, or ends the kernel. We replace it process-wide before
the first connection with a hook that records the fault; whoever owns the
failed work (a ``%%remote`` run) reports it in its own cell.
"""

from __future__ import annotations

import time
from typing import Any

KEEP = 50
#: (monotonic time, first line of the report), newest last; the last KEEP only.
faults: list[tuple[float, str]] = []
#: faults recorded in this process so far. Never decreases (``len(faults)`` stops growing at
#: KEEP): to know whether a fault came since some moment, compare ``count`` with its value then.
count = 0
_installed = False
#: monotonic time processes were last ended on purpose (a kill, a stop): see expect_ends
_expected_at = float("-inf")


def expect_ends() -> None:
    """Processes are about to be ended on purpose (``%job kill``, ``JobTrait.kill``,
    ``ProcMesh.stop``): whoever watches for dead ones (``actors/proc_watch``) says nothing of
    the ends that follow."""
    global _expected_at
    _expected_at = time.monotonic()


def ends_expected(within: float) -> bool:
    """Whether :func:`expect_ends` was called in the last ``within`` seconds."""
    return time.monotonic() - _expected_at < within


def record(failure: Any) -> None:
    """Monarch's ``unhandled_fault_hook``: note the fault instead of exiting the process."""
    global count
    try:
        text = failure.report()
    except Exception:  # a report that cannot be rendered must not take the hook down: keep its str
        text = str(failure)
    faults.append((time.monotonic(), str(text).splitlines()[0] if text else "mesh failure"))
    del faults[:-KEEP]
    count += 1


def install() -> None:
    """Replace Monarch's fault hook once per process (idempotent)."""
    global _installed
    if _installed:
        return
    import monarch.actor as monarch_actor

    monarch_actor.unhandled_fault_hook = record
    _installed = True
