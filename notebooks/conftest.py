"""nbval: the cluster notebook runs against a real sshd on loopback (tests/daemons.py).

The daemon starts before the first cell of ``cluster.ipynb`` (so the notebook's
kernel inherits the variables naming it) and stops, with every process of its
sessions, at the end of the run. If it cannot start, the run fails saying why.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

_state: dict = {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if Path(str(item.fspath)).name != "cluster.ipynb" or "sshd" in _state:
        return
    from daemons import Sshd, free_port

    folder = tempfile.mkdtemp(prefix="mj-nb-sshd-")
    sshd = Sshd(Path(folder))
    _state["sshd"] = sshd  # before start(): a failed start is not retried per cell
    sshd.start()
    port = free_port()
    sshd.ports_used.add(port)
    os.environ.update(
        {
            "MONARCH_JUPYTER_DEMO_HOSTS": "127.0.0.2,127.0.0.3",
            "MONARCH_JUPYTER_DEMO_SSH_CONFIG": str(sshd.ssh_config),
            "MONARCH_JUPYTER_DEMO_PORT": str(port),
        }
    )


def pytest_sessionfinish(session, exitstatus):
    sshd = _state.pop("sshd", None)
    if sshd is not None:
        sshd.stop()
