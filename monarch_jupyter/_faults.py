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

#: (monotonic time, first line of the report), newest last; bounded.
faults: list[tuple[float, str]] = []
_installed = False


def install() -> None:
    """Replace Monarch's fault hook once per process (idempotent)."""
    global _installed
    if _installed:
        return
    import monarch.actor as monarch_actor

    def record(failure: Any) -> None:
        try:
            text = failure.report()
        except Exception:
            text = str(failure)
        faults.append((time.monotonic(), str(text).splitlines()[0] if text else "mesh failure"))
        del faults[:-50]

    monarch_actor.unhandled_fault_hook = record
    _installed = True
