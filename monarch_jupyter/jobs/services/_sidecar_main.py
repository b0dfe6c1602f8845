"""The job sidecar process: leave the kernel's session, bind the dashboard on loopback, then
run Monarch's own sidecar (``python -m`` with Monarch's arguments; see :mod:`.sidecar`)."""

from __future__ import annotations

import contextlib
import os

from ...runtime import introspect as _introspect

#: The dashboard's bind host (Monarch's is "::", every interface).
DASHBOARD_HOST = "127.0.0.1"


def main() -> None:
    # A kernel restart (killpg of the kernel's group) must not reach it; EPERM: already a leader.
    with contextlib.suppress(OSError):
        os.setsid()
    _introspect.bind_dashboard_to(DASHBOARD_HOST)
    _introspect.run_sidecar_worker()


if __name__ == "__main__":
    main()
