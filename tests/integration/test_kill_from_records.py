"""#22 §3: ``%job kill`` right after a restart stops a local job from its records, without
unpickling it or importing Monarch, and refuses what the ordinary kill refuses (real kernels,
real ProcessJob workers)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from harness import poll, tagged_pids, usage_error, worker_pids

IMPORTED = "import sys; print('monarch' in sys.modules, 'pyarrow' in sys.modules)"


def _sessions_alive(sessions: set[int]) -> list[int]:
    alive = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) in sessions:
                    with open(f"/proc/{entry}/stat") as stream:
                        if stream.read().rsplit(")", 1)[1].split()[0] != "Z":
                            alive.append(int(entry))
            except OSError:
                pass
    return alive


def _not_kernels(tag: str) -> list[tuple[int, bytes]]:
    """The tagged processes that are not kernels, with their command lines."""
    found = []
    for pid in tagged_pids(tag):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"ipykernel" not in command:
            found.append((pid, command[:160]))
    return found


def _sockets_folder(pid: int) -> Path:
    with open(f"/proc/{pid}/cmdline", "rb") as stream:
        found = re.search(rb"ipc://(/\S*?/monarch_process_job_\w+)/", stream.read())
    assert found, "a ProcessJob worker names its socket folder"
    return Path(os.fsdecode(found.group(1)))


def test_kill_after_a_restart_stops_every_worker_without_monarch(start_kernel, workdir, tag):
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=2")
    k.ok("%%remote --detach\nsleep 600")  # a run that outlives the kernel: stopped first
    workers = worker_pids(tag)
    assert len(workers) == 2
    sockets = _sockets_folder(workers[0])
    assert sockets.is_dir()
    context = workdir / ".monarch" / "default"
    sleeping = lambda: [p for p in tagged_pids(tag) if b"sleep" in Path(f"/proc/{p}/cmdline").read_bytes()]  # noqa: E731
    assert poll(lambda: len(sleeping()) == 2, 10), "the run's processes"
    k.restart()
    k.ok("%load_ext monarch_jupyter")
    started = time.monotonic()
    killed = k.ok("%job kill")
    took = time.monotonic() - started
    text = killed.text
    assert "killed the job of context 'default' (ProcessJob" in text and "hosts×2" in text, text
    assert "stopped 1 run first" in text, text
    print(f"%job kill after a restart: {took * 1000:.0f} ms")
    assert k.ok(IMPORTED).text.split() == ["False", "False"], "nothing unpickled, Monarch not imported"
    assert _sessions_alive(set(workers)) == [], "every worker and what it started is gone"
    assert sleeping() == [], "the run was stopped"
    assert poll(lambda: _not_kernels(tag) == [], 5), _not_kernels(tag)
    assert not sockets.exists(), "Monarch's socket folder is removed, as its own kill does"
    assert not (context / "state.pkl").exists() and not (context / "state.pkl.sig").exists()
    assert json.loads((context / "status.json").read_text())["state"] == "no job"
    assert "no job" in k.ok("%job").text
    assert "no job to kill" in usage_error(k.execute("%job kill"))
    time.sleep(0.3)  # the background attach was called off: it does not come back
    assert k.ok(IMPORTED).text.split() == ["False", "False"]
    k.ok("%job apply --local hosts=1")  # the folder works as before
    assert len(worker_pids(tag)) == 1
    k.ok("%job kill")


def test_an_unsafe_cache_is_refused_and_an_unsigned_one_is_moved_aside(start_kernel, workdir, tag):
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=2")
    workers = worker_pids(tag)
    state = workdir / ".monarch" / "default" / "state.pkl"
    signature = state.with_name("state.pkl.sig")
    state.chmod(0o666)  # signed, but anyone could have rewritten it since: refused, nothing done
    k.restart()
    k.ok("%load_ext monarch_jupyter")
    assert "is writable by group/others" in usage_error(k.execute("%job kill"))
    assert all(os.path.exists(f"/proc/{p}") for p in workers) and state.exists()
    state.chmod(0o600)
    signature.unlink()  # as `monarch apply` in a terminal leaves it: not loaded, moved aside
    killed = k.ok("%job kill").text
    assert "moved the unusable .monarch/default/state.pkl" in killed, killed
    assert "stopped 2 worker(s) your own record of it listed" in killed, killed  # never from the cache
    assert not state.exists() and list(state.parent.glob("state.pkl.unreadable-*"))
    assert poll(lambda: not _sessions_alive(set(workers)), 10)


def test_records_that_disagree_take_monarchs_kill(start_kernel, workdir, tag):
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=2")
    workers = worker_pids(tag)
    status = workdir / ".monarch" / "default" / "status.json"
    data = json.loads(status.read_text())
    data["worker_pids"]["hosts_1"] = os.getpid()  # a doctored record names another process
    status.write_text(json.dumps(data))
    k.restart()
    k.ok("%load_ext monarch_jupyter")
    assert "killed the job" in k.ok("%job kill", timeout=60).text
    assert k.ok(IMPORTED).text.split()[0] == "True", "the ordinary kill unpickled the job"
    assert poll(lambda: not _sessions_alive(set(workers)), 10)
    assert os.path.exists(f"/proc/{os.getpid()}")
