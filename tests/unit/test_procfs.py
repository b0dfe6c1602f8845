"""``_procfs``: the one /proc reader and the one escalation, on synthetic lines and real processes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from monarch_jupyter.system import procfs as _procfs

# "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
#  cutime cstime priority nice num_threads itrealvalue starttime …"
TAIL = "S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 12345 67"


def test_a_comm_with_spaces_and_parentheses_is_split_at_the_last_paren():
    fields = _procfs.parse_stat(f"77 (a) (b c) ) {TAIL}\n")
    assert fields[0] == "S" and fields[2] == "4242" and fields[19] == "987654"
    with pytest.raises(ValueError):
        _procfs.parse_stat("77 no paren here")


def test_a_zombie_is_not_alive():
    assert not _procfs.fields_alive(_procfs.parse_stat(f"9 (z) Z{TAIL[1:]}"))
    assert not _procfs.fields_alive(_procfs.parse_stat(f"9 (x) X{TAIL[1:]}"))
    assert _procfs.fields_alive(_procfs.parse_stat(f"9 (s) {TAIL}"), ticks=987654)
    assert not _procfs.fields_alive(_procfs.parse_stat(f"9 (s) {TAIL}"), ticks=1)  # a reused pid
    child = subprocess.Popen(["true"])
    while _procfs.state(child.pid) not in ("Z", None):  # exited, not reaped: a zombie
        time.sleep(0.01)
    try:
        assert not _procfs.alive(child.pid)
    finally:
        child.wait()
    assert _procfs.state(child.pid) is None and not _procfs.alive(child.pid)


def test_the_current_process():
    me = os.getpid()
    assert _procfs.alive(me) and _procfs.state(me) in ("R", "S")
    assert _procfs.pgid(me) == os.getpgid(0)
    ticks = _procfs.start_ticks(me)
    assert ticks is not None and _procfs.alive(me, ticks) and not _procfs.alive(me, ticks + 1)
    assert _procfs.group_alive(os.getpgid(0))
    assert me in _procfs.pids()


def test_environ_scan_finds_processes_carrying_a_value():
    env = dict(os.environ, MJ_PROCFS_TEST="v1", XMJ_PROCFS_TEST="v2")
    child = subprocess.Popen(["sleep", "30"], env=env)
    other = subprocess.Popen(["sleep", "30"], env=dict(os.environ, XMJ_PROCFS_TEST="v1"))
    try:
        found = _procfs.pids_with_env("MJ_PROCFS_TEST", {"v1"})
        assert found == {"v1": [child.pid]}  # a name that only ends the same is not it
        assert _procfs.env_value(child.pid, "MJ_PROCFS_TEST") == "v1"
        assert _procfs.pids_with_env("MJ_PROCFS_TEST", {"other"}) == {}
    finally:
        for p in (child, other):
            p.kill()
            p.wait()
    assert _procfs.pids_with_env("MJ_PROCFS_TEST", {"v1"}) == {}


TRAPS = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN if sys.argv[1] == 'both' else signal.SIG_DFL)\n"
    "print('ready', flush=True)\n"
    "time.sleep(100)\n"
)


def _trapping(which: str) -> subprocess.Popen:
    child = subprocess.Popen(
        [sys.executable, "-c", TRAPS, which], stdout=subprocess.PIPE, start_new_session=True
    )
    assert child.stdout is not None and child.stdout.readline() == b"ready\n"
    return child


def test_escalation_on_a_child_that_traps_sigint_and_sigterm():
    child = _trapping("both")
    sent = []
    start = time.monotonic()

    def send(sig: int) -> None:
        sent.append(sig)
        _procfs.killpg(child.pid, sig)

    _procfs.escalate(send, lambda: child.poll() is None, grace=0.2)
    took = time.monotonic() - start
    assert sent == [signal.SIGINT, signal.SIGTERM, signal.SIGKILL] and 0.35 < took < 2, took
    assert child.wait(5) == -signal.SIGKILL


def test_escalation_stops_at_the_signal_that_worked():
    child = _trapping("int")
    _procfs.escalate(lambda sig: _procfs.killpg(child.pid, sig), lambda: child.poll() is None, grace=0.5)
    assert child.wait(5) == -signal.SIGTERM


def test_async_escalation_of_a_group():
    async def main():
        child = _trapping("both")
        start = time.monotonic()
        await _procfs.stop_group(child.pid, grace=0.2)
        assert 0.35 < time.monotonic() - start < 2 and child.wait(5) == -signal.SIGKILL
        assert not _procfs.group_alive(child.pid)

    asyncio.run(asyncio.wait_for(main(), 30))


def test_waits_for_an_exit():
    child = subprocess.Popen(["sleep", "0.2"])
    start = time.monotonic()
    _procfs.wait_exit(child.pid, 5, lambda: child.poll() is not None)
    assert 0.15 < time.monotonic() - start < 2 and child.wait(1) == 0
    slow = subprocess.Popen(["sleep", "30"])
    ticks = []
    try:
        start = time.monotonic()
        _procfs.wait_exit(slow.pid, 0.1, lambda: slow.poll() is not None, 0.01, lambda: bool(ticks.append(1)))
        assert time.monotonic() - start < 1 and len(ticks) >= 3  # waited its limit, ticking
    finally:
        slow.kill()
        slow.wait()

    async def main():
        child = subprocess.Popen(["sleep", "0.2"])
        await _procfs.wait_exit_async(child.pid, lambda: child.poll() is None)
        assert child.wait(1) == 0

    asyncio.run(asyncio.wait_for(main(), 10))
