"""A run's processes cannot leave it, end to end, with a real kernel and real ``--local hosts=2`` workers: a process
that leaves its run with ``setsid`` and an empty environment keeps the run listed as running and
is stopped by ``%job kill``; ``-e`` refuses our reserved names. Reaped by command line (an
escapee sheds the test's tag with the rest of its environment)."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import threading
import time

import pytest

from harness import poll, tagged_pids, usage_error, worker_pids
from monarch_jupyter.system import procfs as _procfs

SECONDS = "301.517"


def _escapees(*, execed: bool = False) -> list[int]:
    """Processes whose command line ends in SECONDS; with ``execed``, only those already running
    ``sleep`` (``setsid`` and ``env -i`` carry the same tail, and the run's environment, until they
    exec: CI once caught one there)."""
    found = []
    for p in _procfs.pids():
        argv = _procfs.cmdline(p) or []
        if argv[-1:] == [SECONDS] and (not execed or argv == ["sleep", SECONDS]):
            found.append(p)
    return found


@pytest.fixture
def job_kernel(start_kernel):
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=2")
    try:
        yield k
    finally:
        for pid in _escapees():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_an_escapee_with_no_environment_is_listed_and_job_kill_stops_it(job_kernel):
    k = job_kernel
    r = k.ok(f"%remote setsid env -i sleep {SECONDS} & echo left")
    assert "[hosts=0] left" in r.text and "[hosts=1] left" in r.text, r.text
    assert poll(lambda: len(_escapees(execed=True)) == 2, 10, 0.1), "the escapees never started"
    assert all(_procfs.env_value(p, "MONARCH_JUPYTER_RUN") is None for p in _escapees(execed=True))
    listing = k.ok("%remote runs").text
    assert "finished: ok" not in listing and "outside its group" in listing, listing
    r = k.ok("%job kill")
    assert "stopped 1 run" in r.text, r.text
    assert poll(lambda: not _escapees(), 10, 0.1), "an escapee outlived %job kill"


GRAND = "301.518"


def _grandchildren() -> list[int]:
    return [p for p in _procfs.pids() if (_procfs.cmdline(p) or [])[-1:] == [GRAND]]


def test_a_grandchild_orphaned_after_its_run_is_still_stopped(job_kernel):
    """An escapee that outlives its run's leader starts a child and exits;
    the child, re-parented outside the run (not to its leader, which has gone), shed the marker and
    its parent, but keeps the escapee's session: ``%remote runs`` lists it, ``%job kill`` stops it."""
    k = job_kernel
    try:
        r = k.ok(f"%remote setsid env -i /bin/bash -c '/bin/sleep {GRAND} & /bin/sleep 1' & echo left")
        assert "[hosts=0] left" in r.text, r.text
        assert poll(lambda: len(_grandchildren()) == 2, 10, 0.1), "the grandchildren never started"
        time.sleep(1.5)  # the escapees (their parents) have exited: the grandchildren are orphans
        listing = k.ok("%remote runs").text
        assert "finished: ok" not in listing, listing
        killed = k.ok("%job kill").text
        assert poll(lambda: not _grandchildren(), 10, 0.1), (listing, killed)
    finally:
        for pid in _grandchildren():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_env_refuses_the_run_marker(job_kernel):
    line = usage_error(job_kernel.execute("%remote -e MONARCH_JUPYTER_RUN=x echo hi"))
    assert "MONARCH_JUPYTER_RUN" in line and "reserved" in line, line


def test_a_stopped_worker_is_named_by_job_and_remote_fails_fast(job_kernel, tag):
    """A SIGSTOPped worker is not live; ``%remote`` says so at once rather than
    waiting for Monarch's 30 s timeout."""
    k = job_kernel
    k.ok("%remote true")
    victim = sorted(worker_pids(tag))[-1]
    os.kill(victim, signal.SIGSTOP)
    try:
        assert poll(lambda: _procfs.stopped(victim), 5, 0.05)
        status = k.ok("%job").text
        assert "1 live workers" in status and f"(pid {victim}) is stopped (SIGSTOP)" in status, status
        assert f"kill -CONT {victim}" in status, status
        began = time.monotonic()
        r = k.execute("%remote echo hi", timeout=60)
        took = time.monotonic() - began
        assert f"(pid {victim}) is stopped" in r.text and "Traceback" not in r.text, r.text
        assert took < 20, took  # not Monarch's timeout (a bound, not a timing claim)
    finally:
        os.kill(victim, signal.SIGCONT)
    assert "[hosts=1] back" in k.ok("%remote echo back").text


@pytest.fixture
def full_runs_folder(tmp_path):
    """A 1 MiB tmpfs to be the workers' runs folder (umounted whatever happens; skipped where
    mounting is not allowed), and a function filling it."""
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True
    ).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")

    def fill() -> None:
        fd = os.open(mount / "fill", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, b"x" * 65536)
        except OSError as error:
            assert error.errno == errno.ENOSPC
        finally:
            os.close(fd)

    try:
        yield mount / "runs", fill
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_runs_folder_is_named_in_one_line(start_kernel, full_runs_folder):
    """ENOSPC in the runs folder is one line naming it, for a run and --detach."""
    runs, fill = full_runs_folder
    k = start_kernel(env={"MONARCH_JUPYTER_RUNS_DIR": str(runs)})
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=2")
    assert "[hosts=1] hi" in k.ok("%remote echo hi").text
    fill()
    r = k.execute("%remote echo hi", timeout=60)
    assert f"the runs folder {runs} is full (ENOSPC)" in r.text and "Traceback" not in r.text, r.text
    assert "died" not in r.text and "failed a probe" not in r.text, r.text  # no rank called lost
    line = usage_error(k.execute("%remote --detach echo hi", timeout=60))
    assert f"the runs folder {runs} is full (ENOSPC)" in line, line
    k.ok("%job kill")


def _tagged_sleeps(tag: str, seconds: str) -> list[int]:
    return [p for p in tagged_pids(tag) if (_procfs.cmdline(p) or [])[-1:] == [seconds]]


@pytest.mark.parametrize("stop", ["%remote stop --all", "%job kill"])
def test_a_run_stopped_from_another_kernel_says_so(job_kernel, start_kernel, tag, stop):
    """The cell whose run another kernel stopped says it was stopped, and by
    what, rather than "did not succeed (rc -2)"."""
    a = job_kernel
    box: dict[str, object] = {}
    worker = threading.Thread(target=lambda: box.update(r=a.execute("%remote sleep 300.61", timeout=60)))
    worker.start()
    try:
        assert poll(lambda: len(_tagged_sleeps(tag, "300.61")) == 2, 20, 0.1)
        b = start_kernel()
        b.ok("%load_ext monarch_jupyter")
        b.ok(stop)
    finally:
        worker.join(60)
    r = box["r"]
    assert f"was stopped by {stop.split(' --')[0]} (kernel pid" in r.text, r.text
    assert "rc -2" not in r.text.splitlines()[-1], r.text
