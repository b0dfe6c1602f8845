"""A starved machine loses no live rank; a dead worker is still reported at once (real kernel,
real ``ProcessJob`` workers, ``--local hosts=2`` × ``--per-host procs=16`` = 32 ranks).

Every core is held busy by bounded CPU hogs (each ends by itself, and the test kills and reaps
it by PID whatever happens) while one host's worker and one rank's proc are SIGSTOPped for
10 s and then continued, and the 32 ranks print for 60 s: no rank is lost, every line is in the
run log, in order. Then a worker is SIGKILLed mid-run: its ranks are lost, named as dead.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness import child_pids, poll, run_payload, worker_pids
from monarch_jupyter.remote.run.spool import read_log

PER_HOST = "--per-host procs=16"
LINES = 300  # × 0.2 s: 60 s of printing
HOG = "import time\nend = time.monotonic() + float(__import__('sys').argv[1])\nwhile time.monotonic() < end: pass"

pytestmark = pytest.mark.kernel


@contextlib.contextmanager
def cpu_hogs(seconds: float):
    """One busy loop per core, each ending after ``seconds``; killed and reaped by PID on exit."""
    hogs = [subprocess.Popen([sys.executable, "-c", HOG, str(seconds)]) for _ in range(os.cpu_count() or 2)]
    try:
        yield [h.pid for h in hogs]
    finally:
        for hog in hogs:
            with contextlib.suppress(OSError):
                hog.kill()
            hog.wait(10)


def _workers(tag: str) -> list[int]:
    """The job's two host workers, hosts=0's first (spawned first, so a lower start time)."""
    pids = worker_pids(tag)
    assert len(pids) == 2, pids
    return sorted(pids, key=lambda p: int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[19]))


def test_a_starved_and_stopped_worker_loses_no_rank_and_a_killed_one_is_reported(start_kernel, tag):
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=2", timeout=300)
    k.ok(f"%remote {PER_HOST} true", timeout=300)  # the 32 procs and their actors, warm
    worker = _workers(tag)[1]
    procs = child_pids(worker)
    assert procs, "no proc under the worker"
    stopped: dict[str, float] = {}

    def stop_then_continue() -> None:
        time.sleep(8.0)
        targets = [worker, procs[0]]
        for pid in targets:
            os.kill(pid, signal.SIGSTOP)
        stopped["at"] = time.monotonic()
        time.sleep(10.0)
        for pid in targets:
            os.kill(pid, signal.SIGCONT)
        stopped["for"] = time.monotonic() - stopped["at"]

    cell = f"%%remote {PER_HOST}\nfor i in $(seq 1 {LINES}); do echo line $i; sleep 0.2; done"
    with cpu_hogs(90.0) as hogs:
        load = os.getloadavg()[0]
        pauser = threading.Thread(target=stop_then_continue)
        pauser.start()
        try:
            r = k.execute(cell, timeout=400)
        finally:
            pauser.join(30)
            for pid in (worker, procs[0]):  # never leave a stopped process behind
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGCONT)
        assert all(poll(lambda p=p: not Path(f"/proc/{p}").exists(), 0) is not None for p in hogs)
    print(f"load at the start {load:.1f}; stopped for {stopped.get('for', 0):.1f} s")
    assert stopped.get("for", 0) >= 10.0
    assert r.error is None, r.text[-3000:]
    assert "died" not in r.text and "stopped answering" not in r.text and "failed a probe" not in r.text
    payload = run_payload(r)
    assert payload["summary"]["ok"] == 32, payload["summary"]
    log = read_log(k.cwd / payload["log_path"])
    ranks = [key for key in log if key != "#" and not key.endswith(":err")]
    assert len(ranks) == 32, ranks
    expected = [f"line {i}" for i in range(1, LINES + 1)]
    for rank in ranks:
        assert log[rank] == expected, (rank, log[rank][:5], len(log[rank]))
    silences = [n for n in log["#"] if "silent for" in n]
    print("silence lines:", silences[:4])

    # a worker SIGKILLed mid-run: its ranks are lost at once, as dead (the note's arrival in the
    # run log is timed: it includes the log's 0.5 s flush)
    killed: dict[str, float] = {}
    before = set(k.cwd.glob(".monarch/*/runs/*.log"))

    def watch_log() -> None:
        found = poll(lambda: list(set(k.cwd.glob(".monarch/*/runs/*.log")) - before), 10, 0.01)
        if found and poll(
            # the worker or one of its procs, whichever the drive saw gone first, is named
            lambda: re.search(r"worker process \d+ died", found[0].read_text(errors="replace")),
            20,
            0.01,
        ):
            killed["reported"] = time.monotonic() - killed["at"]

    watcher = threading.Thread(target=watch_log)

    def kill_on_output(out) -> None:
        if not killed and out.msg_type == "stream" and "tick 3" in out.content.get("text", ""):
            killed["at"] = time.monotonic()
            os.kill(worker, signal.SIGKILL)
            watcher.start()

    r = k.execute(
        f"%%remote {PER_HOST}\nfor i in $(seq 1 40); do echo tick $i; sleep 0.2; done",
        timeout=300,
        on_output=kill_on_output,
    )
    assert killed, r.text[-2000:]
    watcher.join(30)
    print(
        f"a killed worker's ranks noted lost in the run log {killed.get('reported', -1):.2f} s after the kill"
    )
    assert r.error and r.error["ename"] == "RemoteError", r.text[-2000:]
    # the host worker or a rank's own proc, whichever the drive saw gone first, is named
    assert re.search(r"worker process \d+ died", r.error["evalue"]), r.error["evalue"]
    payload = run_payload(r)
    assert payload["summary"]["ok"] == 16 and payload["summary"]["failed"] == 16, payload["summary"]
    notes = read_log(k.cwd / payload["log_path"])["#"]
    assert sum(bool(re.search(r"worker process \d+ died", n)) for n in notes) == 16, notes
    assert killed.get("reported", 99.0) < 5.0  # generous: the drive looks every 0.25 s
