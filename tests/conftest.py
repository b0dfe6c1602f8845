"""Fixtures: a folder per test, real kernels started there, and reaping.

Each test gets its own tag; at teardown every process carrying it (kernels'
workers, their children) is killed by PID, even when the test failed. At the
end of the run, processes carrying any tag of this run fail the run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import Kernel, new_tag, reap, tagged_pids  # noqa: E402

_RUN_TAGS: list[str] = []


@pytest.fixture
def tag() -> str:
    value = new_tag()
    _RUN_TAGS.append(value)
    yield value
    reap(value)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    folder = tmp_path / "nb"
    folder.mkdir()
    return folder


@pytest.fixture
def start_kernel(workdir: Path, tag: str):
    """Factory: start_kernel(cwd=workdir) → Kernel; all are shut down and reaped."""
    kernels: list[Kernel] = []

    def start(cwd: Path | None = None, env: dict | None = None) -> Kernel:
        kernel = Kernel(cwd or workdir, tag, env)
        kernels.append(kernel)
        return kernel

    yield start
    for kernel in kernels:
        try:
            kernel.shutdown()
        except Exception:
            pass


@pytest.fixture
def kernel(start_kernel) -> Kernel:
    """A kernel in the test's folder with the extension loaded."""
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    return k


def pytest_sessionfinish(session, exitstatus):
    leftovers = {t: tagged_pids(t) for t in _RUN_TAGS}
    leftovers = {t: p for t, p in leftovers.items() if p}
    if leftovers:
        for t in leftovers:
            reap(t)
        session.config.pluginmanager.get_plugin("terminalreporter").write_line(
            f"ORPHANS: processes outlived their tests: {leftovers}", red=True
        )
        session.exitstatus = 1


# ── real cluster daemons (tests/daemons.py): fail, never skip, when one cannot start ──
@pytest.fixture
def sshd(tmp_path: Path, tag: str):
    """A real sshd on 127.0.0.1/.2/.3 (free port); its sessions carry the test's tag."""
    from daemons import Sshd

    from harness import TAG_VAR

    server = Sshd(tmp_path / "sshd", {TAG_VAR: tag})
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def slurm(tmp_path: Path):
    """A real single-node Slurm (slurmctld + slurmd) with state, spool, pids and logs in tmp_path."""
    from daemons import Slurm

    cluster = Slurm(tmp_path / "slurm")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
