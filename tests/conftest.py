"""Fixtures: a folder per test, real kernels started there, and reaping.

Each test gets its own tag; at teardown every process carrying it (kernels'
workers, their children) is killed by PID, even when the test failed. At the
end of the run, processes carrying any tag of this run fail the run.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import Kernel, can_add_users, new_tag, other_user, reap, tagged_pids

_RUN_TAGS: list[str] = []


@pytest.fixture
def tag() -> str:
    value = new_tag()
    _RUN_TAGS.append(value)
    yield value
    reap(value)


@pytest.fixture
def second_user():
    """A throwaway second Unix user (harness.other_user); skipped unless we are root."""
    if not can_add_users():
        pytest.skip("needs root with useradd/userdel/setpriv to create a second user")
    with other_user() as user:
        yield user


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    folder = tmp_path / "nb"
    folder.mkdir()
    return folder


@pytest.fixture
def start_kernel(workdir: Path, tag: str):
    """Factory: start_kernel(cwd=workdir) → Kernel; all are shut down and reaped."""
    kernels: list[Kernel] = []

    def start(cwd: Path | None = None, env: dict | None = None, kernel_name: str = "python3") -> Kernel:
        kernel = Kernel(cwd or workdir, tag, env, kernel_name)
        kernels.append(kernel)
        return kernel

    yield start
    for kernel in kernels:
        # a kernel that already died: the tag's reaper still kills what it left
        with contextlib.suppress(Exception):
            kernel.shutdown()


@pytest.fixture
def kernel(start_kernel) -> Kernel:
    """A kernel in the test's folder with the extension loaded."""
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    return k


# Markers from the fixtures a test uses (pyproject.toml registers them), so that
# `pytest -m "not kernel and not daemon and not browser" tests` is the quick set.
# Tests that start kernels, workers or a browser without these fixtures carry the marker
# themselves (test_remote's module kernel, test_run_notebook, test_browser, test_packaging,
# one pin).
MARKER_FIXTURES = {
    "kernel": {"kernel", "start_kernel"},
    "daemon": {"sshd", "slurm", "server"},  # server: test_server_ext's real `jupyter server`
}
SLOW_MARKERS = ("kernel", "daemon", "browser")
UNIT = Path(__file__).parent / "unit"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    misplaced = []
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in MARKER_FIXTURES.items():
            if used & fixtures:
                item.add_marker(marker)
        slow = [m for m in SLOW_MARKERS if item.get_closest_marker(m)]
        if slow and UNIT in item.path.parents:
            misplaced.append(f"{item.nodeid} ({', '.join(slow)})")
    if misplaced:
        # tests/unit/ must stay quick without -m: a slow test there is a mistake, not a choice
        raise pytest.UsageError("move to tests/integration/: " + "; ".join(misplaced))


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
