"""``_local_records``: which local jobs ``%job kill`` may stop from their records, and the kill
(stand-in workers: plain Python processes leading their own sessions, no Monarch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from monarch_jupyter.jobs import local_records as _local_records
from monarch_jupyter.jobs import signing as _signing
from monarch_jupyter.jobs.contexts import Layout
from monarch_jupyter.system import live as _live
from monarch_jupyter.system import procfs as _procfs
from test_warmup_units import APPLY_ID, write_cache


@pytest.fixture
def workers(tmp_path, monkeypatch):
    """Two stand-in workers whose command lines name a socket folder as ProcessJob's do."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    sockets = tmp_path / "monarch_process_job_abc123"
    sockets.mkdir()
    started = []
    for i in range(2):
        address = f"service<x>@ipc://{sockets}/hosts_{i}"
        code = f"import time; address = {address!r}; time.sleep(60)"
        started.append(subprocess.Popen([sys.executable, "-c", code], start_new_session=True))
    yield started, sockets
    for process in started:
        process.kill()
        process.wait()


def _recorded(root: Path, procs: list[subprocess.Popen]) -> Layout:
    write_cache(root, {f"hosts_{i}": p.pid for i, p in enumerate(procs)}, hosts=len(procs))
    _live.record(str(root), "default", APPLY_ID, {f"hosts_{i}": p.pid for i, p in enumerate(procs)})
    return Layout(root)


def _killable(root: Path):
    layout = Layout(root)
    return _local_records.killable(layout, layout.state_path("default"), "default")


def _why_refused(root: Path, procs: list[subprocess.Popen]) -> str:
    """What each record says, for a failure message: which of killable's checks said no."""
    layout = Layout(root)
    state = layout.state_path("default")
    status = _local_records.status_from_files(layout, "default", os.stat(state))
    record = _live.find(str(root), "default")
    return (
        f"signature: {_signing.check(state, state.read_bytes())}; "
        f"status: {status and (status.state, status.services, status.worker_pids)}; "
        f"sidecar lock: {os.path.lexists(_local_records.sidecar_lock(APPLY_ID))}; "
        f"live record: {record and (record.apply_id, record.workers, record.alive())}; "
        f"workers: {[(p.pid, p.poll(), _procfs.state(p.pid), _procfs.cmdline(p.pid)) for p in procs]}"
    )


def test_a_job_both_records_vouch_for_is_killed_with_its_socket_folder(tmp_path, workers):
    procs, sockets = workers
    root = tmp_path / "nb"
    root.mkdir()
    _recorded(root, procs)
    found = _killable(root)
    assert found is not None, _why_refused(root, procs)
    assert found.sockets == sockets
    assert sorted(found.workers) == sorted(p.pid for p in procs)
    assert _local_records.kill(found) == sorted(p.pid for p in procs)
    for process in procs:
        assert process.wait(5) is not None
    assert not sockets.exists()
    assert _live.find(str(root), "default") is None


@pytest.mark.parametrize(
    "spoil",
    [
        "unsigned",
        "bad signature",
        "status about another pickle",
        "a service",
        "live record disagrees",
        "no record",
    ],
)
def test_anything_the_records_cannot_vouch_for_takes_the_ordinary_kill(tmp_path, workers, spoil):
    procs, _ = workers
    root = tmp_path / "nb"
    root.mkdir()
    layout = _recorded(root, procs)
    state = layout.state_path("default")
    status_path = layout.context_dir("default") / "status.json"
    status = json.loads(status_path.read_text())
    if spoil == "unsigned":
        state.with_name("state.pkl.sig").unlink()
    elif spoil == "bad signature":
        state.with_name("state.pkl.sig").write_text("0" * 64 + "\n")
    elif spoil == "status about another pickle":
        os.utime(state, (time.time() + 5, time.time() + 5))
    elif spoil == "a service":
        status["services"] = ["telemetry"]
    elif spoil == "live record disagrees":
        _live.record(str(root), "default", APPLY_ID, {"hosts_0": procs[0].pid, "hosts_1": os.getpid()})
    elif spoil == "no record":
        _live.forget(str(root), "default")
    status_path.write_text(json.dumps(status))
    assert _killable(root) is None
    assert all(_procfs.alive(p.pid) for p in procs), "nothing was signalled"


def test_a_worker_that_ended_or_was_replaced_is_not_killed_from_the_records(tmp_path, workers):
    procs, _ = workers
    root = tmp_path / "nb"
    root.mkdir()
    _recorded(root, procs)
    procs[1].kill()
    procs[1].wait()
    assert _killable(root) is None, "dead workers: Monarch's kill and its report"
