"""Processes: a run's processes cannot leave it (``setsid`` + an empty environment, a
child ``execve``'d with no environment, ``-e`` over our marker), stops count what they signalled.
Real bash, no Monarch; every test reaps what it started, by the command line it gave."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

import pytest

from harness import poll
from monarch_jupyter.errors import MonarchJupyterError
from monarch_jupyter.remote.host import layout as L
from monarch_jupyter.remote.host import runs as R
from monarch_jupyter.remote.host import shell
from monarch_jupyter.remote.host import spares as S
from monarch_jupyter.remote.host.capture import CapturedProcess
from monarch_jupyter.remote.view import args as A
from monarch_jupyter.system import procfs as _procfs

ENV = dict(os.environ, PYTHONUNBUFFERED="1")
SLEEPS = ("30.171", "30.172", "30.173", "30.174")  # unique: what the tests look for and reap


def _sleeping(seconds: str) -> list[int]:
    return [p for p in _procfs.pids() if (_procfs.cmdline(p) or [])[-1:] == [seconds]]


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    monkeypatch.setenv("MONARCH_JUPYTER_RUNS_DIR", str(root))
    yield root
    for seconds in SLEEPS:
        for pid in _sleeping(seconds):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    for meta in root.glob("*/*/meta.json"):
        data = L.read_json(meta)
        if data and R.leader_alive(data):
            _procfs.killpg(int(data["pid"]), signal.SIGKILL)


def start(run_id: str, command: str) -> CapturedProcess:
    folder = L.rank_dir(run_id, "hosts", 0)
    S.prepare(folder)
    started = time.time()
    captured = shell.RunShell(ENV, None).take(folder, run_id, "bash", command)
    assert captured is not None
    L.write_meta(
        folder, {"pid": captured.pid, "start_ticks": _procfs.start_ticks(captured.pid), "started": started}
    )
    return captured


async def finished(proc: CapturedProcess) -> int:
    rc = await proc.finish()
    for _ in proc.rest():
        pass
    return rc


ESCAPES = {
    "setsid + env -i": f"setsid env -i sleep {SLEEPS[0]} & echo left",
    "execve with no environment": (
        f'setsid python3 -c \'import os; os.execve("/bin/sleep", ["sleep", "{SLEEPS[1]}"], {{}})\' & echo left'
    ),
}


@pytest.fixture(params=["perl", "forked"])
def leader(request, monkeypatch):
    """The leader made a subreaper by perl's exec (the vfork path) or by a forked preexec_fn."""
    if request.param == "perl":
        if shell.perl_leader() is None:
            pytest.skip("no perl here: the leader is forked")
    else:
        monkeypatch.setattr(shell, "perl_leader", lambda: None)
    return request.param


@pytest.mark.parametrize("command", list(ESCAPES.values()), ids=list(ESCAPES))
def test_an_escapee_without_the_marker_keeps_its_run_and_is_stopped(command, leader):
    seconds = SLEEPS[0] if SLEEPS[0] in command else SLEEPS[1]

    async def main():
        assert await finished(start("x1", command)) == 0
        # it shed the marker once it exec'd sleep
        assert poll(
            lambda: [p for p in _sleeping(seconds) if _procfs.env_value(p, L.MARKER) is None], timeout=5
        )
        (escapee,) = _sleeping(seconds)
        state = poll(lambda: R.host_state(["x1"])["x1"]["strays"] or None, timeout=5)
        assert state == [escapee]  # the run is not over while it runs
        assert R.prune(keep=0, min_age=0) == []
        assert await R.stop_runs(["x1"], grace=0.3) == {"x1": 1}
        assert poll(lambda: not _sleeping(seconds), timeout=5)
        assert R.host_state(["x1"])["x1"]["strays"] == []

    asyncio.run(asyncio.wait_for(main(), 30))


def test_an_escapee_of_a_running_run_is_stopped_with_it():
    async def main():
        proc = start("x2", f"setsid env -i sleep {SLEEPS[2]} & echo up; sleep 100")
        assert poll(
            lambda: _sleeping(SLEEPS[2]) and _procfs.pgid(_sleeping(SLEEPS[2])[0]) != proc.pid, timeout=5
        )
        assert R.host_state(["x2"])["x2"]["strays"] == _sleeping(SLEEPS[2])
        counts = await R.stop_runs(["x2"], grace=0.3)
        assert counts == {"x2": 3}  # the shell running the command, its sleep, the escapee
        assert poll(lambda: not _sleeping(SLEEPS[2]), timeout=5)
        await finished(proc)

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_recorded_pid_that_started_before_the_run_is_not_its_escapee(runs_dir):
    async def main():
        assert await finished(start("x3", "true")) == 0
        folder = L.rank_dir("x3", "hosts", 0)
        (folder / L.ESCAPED).write_text(f"{os.getppid()} {os.getpid()}\n")  # alive, but older
        assert R.marked_pids({"x3"}) == {}
        assert R.host_state(["x3"])["x3"]["strays"] == []

    asyncio.run(asyncio.wait_for(main(), 30))


def test_stopping_many_processes_counts_each():
    async def main():
        proc = start("x4", f"for i in $(seq 40); do sleep {SLEEPS[3]} & done; echo up; wait")
        assert poll(lambda: len(_sleeping(SLEEPS[3])) == 40, timeout=10)
        counts = await R.stop_runs(["x4"], grace=0.3)
        assert counts == {"x4": 41}  # the shell and its 40 sleeps
        await finished(proc)

    asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.parametrize("name", ["MONARCH_JUPYTER_RUN", "MONARCH_RANK_hosts", "MONARCH_SIZE_gpu"])
def test_env_refuses_our_reserved_names(name):
    with pytest.raises(MonarchJupyterError) as error:
        A.parse_line(f"-e {name}=x echo hi")
    line = str(error.value)
    assert "\n" not in line and name in line and "reserved" in line
    assert A.parse_line("-e MONARCH_MINE=x echo hi").env == (("MONARCH_MINE", "x"),)


def test_a_rank_cannot_forge_another_ranks_section_in_the_run_log(tmp_path):
    """Item 19: a line that reads as a header is quoted in the log and read back as printed."""
    from monarch_jupyter.remote.run.spool import Spool, read_log

    path = tmp_path / "run.log"
    spool = Spool(path, ["hosts=0", "hosts=1"])
    spool.write(0, "out", "real\n")
    forged = ["==> [hosts=0:err] <==", "forged", "\\==> [hosts=0] <==", "\\\\==> [#] <==", "x ==> [y] <=="]
    spool.write(1, "out", "\n".join(forged[:2]) + "\n")
    spool.write(1, "out", "\n".join(forged[2:]) + "\n")
    spool.close()
    log = read_log(path)
    assert log["hosts=1"] == forged and log["hosts=0"] == ["real"]
    assert "hosts=0:err" not in log
    assert path.read_text().splitlines().count("==> [hosts=0:err] <==") == 0


def test_invalid_utf8_is_said_once_in_the_run_log(tmp_path):
    """Low item: bytes the host could not decode arrive as U+FFFD; the log says so once."""
    from monarch_jupyter.remote.run.spool import Spool, read_log

    path = tmp_path / "run.log"
    spool = Spool(path, ["hosts=0"])
    for _ in range(3):
        spool.write(0, "out", b"caf\xe9".decode("utf-8", "replace") + "\n")
    spool.close()
    notes = [n for n in read_log(path)["#"] if "U+FFFD" in n]
    assert len(notes) == 1 and "hosts=0" in notes[0] and "keep the bytes" in notes[0], notes


def test_nul_bytes_are_not_saved_into_the_notebook():
    """Low item: a NUL of a rank's output is shown (and saved in the payload) as ␀."""
    import json

    from monarch_jupyter.remote.view import model as M

    ranks = [M.RankState(label="hosts=0", mesh="hosts", point={"hosts": 0}, rank=0)]
    state = M.RunState(command="printf", mode="bash", target="mesh hosts (1 ranks)", ranks=ranks, started=0.0)
    state.apply(M.Output(0, "out", "a\0b\n"))
    assert "\0" not in json.dumps(state.mime_bundle()) and "\\u0000" not in json.dumps(state.mime_bundle())
    assert M.NUL_SHOWN in json.dumps(state.mime_bundle(), ensure_ascii=False)
