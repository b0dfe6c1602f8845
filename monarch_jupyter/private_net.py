"""Persisted path: kernel specs on users' disks run ``python -m monarch_jupyter.private_net``.
The code lives in :mod:`.system.private_net`; this shim never grows."""

from __future__ import annotations

import sys

from .system.private_net import *  # noqa: F403
from .system.private_net import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
