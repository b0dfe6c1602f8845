"""Runs that outlive their kernel, with real kernels and real
``--local hosts=2`` workers: restart mid-run then attach, attach from a second kernel,
``--detach`` then stop from another kernel, a worker killed while detached, ``%job kill`` with
detached runs and escapees. Every test reaps what carries its tag."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest

from harness import Kernel, poll, tagged_pids, worker_pids

TICKS = "for i in $(seq 1 {n}); do echo tick $i; sleep {pause}; done"


def commands(tag: str, needle: str) -> list[str]:
    found = []
    for pid in tagged_pids(tag):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if needle in cmd:
            found.append(cmd)
    return found


def ticks(text: str, label: str) -> list[int]:
    return [int(m) for m in re.findall(rf"^\[{re.escape(label)}\]\s+tick (\d+)$", text, re.MULTILINE)]


def run_id_of(text: str) -> str:
    match = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{6})", text)
    assert match, text
    return match.group(1)


def gone(pid: int) -> bool:
    """Dead for everyone: a zombie or reaped (a SIGKILLed process is neither for a moment)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def send(k: Kernel, code: str) -> str:
    """Start a cell without waiting for it."""
    return k.kc.execute(code)


def wait_for(predicate, timeout: float = 20.0):
    value = poll(predicate, timeout, 0.1)
    assert value, "condition not met in time"
    return value


@pytest.fixture
def job_kernel(start_kernel):
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=2")
    k.ok("%remote true")
    return k


def test_restart_mid_run_then_attach_shows_every_line_once_and_raises(job_kernel, start_kernel, tag, workdir):
    k = job_kernel
    n = 70
    # before its last 5 ticks the run waits (at most 60 s) for the attached cell's first line:
    # still running when attached, however slow a loaded machine makes the restart
    release = workdir / "attached"
    wait = f"[ $i = {n - 5} ] && for _ in $(seq 600); do [ -e {release} ] && break; sleep 0.1; done"
    ticks_then_wait = TICKS.format(n=n, pause=0.1).replace("; done", f"; {wait}; done")
    send(k, "%%remote\n" + ticks_then_wait + "\n[ $MONARCH_RANK_hosts = 1 ] && exit 3; true")
    wait_for(lambda: commands(tag, "sleep 0.1"))
    time.sleep(0.8)
    k.restart()
    wait_for(lambda: commands(tag, "sleep 0.1"), timeout=2)  # the run did not die with its kernel
    r = k.ok("%load_ext monarch_jupyter")
    assert "1 run still running" in r.text and "%remote attach" in r.text, r.text
    listing = k.ok("%remote runs").text
    assert "running (2/2 ranks)" in listing and "tick" in listing, listing
    r = k.execute("%remote attach", timeout=90, on_output=lambda out: release.touch())
    text = r.stream("stdout")
    for label in ("hosts=0", "hosts=1"):
        assert ticks(text, label) == list(range(1, n + 1)), (label, r.text)
    assert r.error and r.error["ename"] == "RemoteError", r.text
    assert "hosts=1 (rc 3)" in r.error["evalue"]
    # live lines came after the replayed ones (the run was still going when we attached)
    stamps = [o.t for o in r.outputs if o.msg_type == "stream"]
    assert stamps[-1] - stamps[0] > 0.3, stamps
    assert "finished: 1 failed" in k.ok("%remote runs").text


def test_attach_from_a_second_kernel_while_the_first_streams(job_kernel, start_kernel, tag, workdir):
    a = job_kernel
    n = 80
    msg = send(a, "%%remote\n" + TICKS.format(n=n, pause=0.1))
    wait_for(lambda: commands(tag, "sleep 0.1"))
    b = start_kernel()
    b.ok("%load_ext monarch_jupyter")
    r = b.ok("%remote attach", timeout=60)
    for label in ("hosts=0", "hosts=1"):
        assert ticks(r.stream("stdout"), label) == list(range(1, n + 1))
    # the first kernel's cell ended normally, with every line too
    reply = a.kc.get_shell_msg(timeout=30)
    while reply["parent_header"].get("msg_id") != msg:
        reply = a.kc.get_shell_msg(timeout=30)
    assert reply["content"]["status"] == "ok"
    assert "finished: ok" in b.ok("%remote runs").text


def test_detach_then_stop_from_another_kernel(job_kernel, start_kernel, tag):
    a = job_kernel
    start = time.monotonic()
    r = a.ok("%%remote --detach\necho begun; sleep 300")
    assert time.monotonic() - start < 5
    run_id = run_id_of(r.text)
    assert "%remote attach" in r.text
    wait_for(lambda: len(commands(tag, "sleep 300")) == 2)
    threading.Thread(target=lambda: (time.sleep(1.5), a.interrupt()), daemon=True).start()
    r = a.execute(f"%remote attach {run_id}", timeout=30)  # Ctrl-C stops following, not the run
    assert "[hosts=1] begun" in r.stream() and "stopped following" in r.stream() and r.error is None, r.text
    assert len(commands(tag, "sleep 300")) == 2
    b = start_kernel()
    b.ok("%load_ext monarch_jupyter")
    assert run_id in b.ok("%remote runs").text
    r = b.ok(f"%remote stop {run_id[-6:]}")
    assert f"stopped run {run_id}" in r.text
    wait_for(lambda: not commands(tag, "sleep 300"), timeout=5)
    assert "stopped" in a.ok("%remote runs").text
    r = a.execute(f"%remote attach {run_id}", timeout=30)  # a stopped run replays its output
    assert "[hosts=0] begun" in r.stream()
    r = b.ok(f"%remote stop {run_id}")  # again: it had already been stopped
    assert r.stream().strip() == f"run {run_id} had already been stopped (stopped); nothing to stop", r.text


def test_stop_of_a_finished_run_says_it_had_already_finished(job_kernel):
    r = job_kernel.ok("%%remote --detach\necho quick")
    run_id = run_id_of(r.text)
    wait_for(lambda: "finished: ok" in job_kernel.ok("%remote runs").text)
    r = job_kernel.ok(f"%remote stop {run_id}")
    assert r.stream().strip() == f"run {run_id} had already finished (ok); nothing to stop", r.text


def test_worker_killed_while_detached_is_reported_on_attach(job_kernel, tag):
    k = job_kernel
    run_id = run_id_of(k.ok("%%remote --detach\nsleep 200").text)
    wait_for(lambda: len(commands(tag, "sleep 200")) == 2)
    victim = sorted(worker_pids(tag))[-1]
    os.kill(victim, 9)
    wait_for(lambda: gone(victim), timeout=5)
    r = k.execute(f"%remote attach {run_id}", timeout=30)
    assert "is dead" in r.text and str(victim) in r.text, r.text
    assert "its processes still run" in r.text and "%job kill" in r.text, r.text
    r = k.ok("%job kill")
    assert "stopped 1 run" in r.text
    wait_for(lambda: not commands(tag, "sleep 200"), timeout=5)


def test_job_kill_stops_detached_runs_and_escapees(job_kernel, tag):
    k = job_kernel
    k.ok("%%remote --detach\nsetsid sleep 778 & sleep 300")
    k.ok("%remote --detach sleep 301")
    wait_for(lambda: len(commands(tag, "sleep 778")) == 2 and len(commands(tag, "sleep 301")) == 2)
    r = k.ok("%job")
    assert "2 runs still running" in r.text, r.text
    r = k.ok("%job kill")
    assert "stopped 2 runs first" in r.text, r.text
    wait_for(
        lambda: not [p for p in tagged_pids(tag) if p not in (k.km.provisioner.process.pid,)], timeout=10
    )


def test_escapee_keeps_a_finished_run_listed_until_stopped(job_kernel, tag):
    k = job_kernel
    r = k.ok("%remote --rank 0 setsid sleep 779 & echo left")
    assert "[hosts=0] left" in r.text
    wait_for(lambda: commands(tag, "sleep 779"))
    listing = k.ok("%remote runs").text
    assert "outside its group" in listing, listing
    # the same through the actors (the path of jobs whose hosts are not this machine)
    r = k.ok(
        "from monarch_jupyter.remote.run import index as _I\n"
        "from monarch_jupyter.remote.run.runner import runner_for as _rf\n"
        "import monarch_jupyter as _m\n"
        "_s = _m.current_session(); _e = _I.load_entries(_I.where(_s).runs_dir)[0]; _e.local = False\n"
        "_h = _rf(_s).host_states([_e.id])[_e.id]\n"
        "print(sorted(_h['ranks']), len(_h['strays']), _rf(_s).stop_runs([_e]))"
    )
    assert r.stream().startswith("['hosts.0'] 1 {") and ": 1}" in r.stream(), r.stream()
    wait_for(lambda: not commands(tag, "sleep 779"), timeout=5)


def test_detached_grid_updates_while_the_kernel_is_idle_and_its_stop_stops_the_run(job_kernel, tag):
    """``%%remote --detach`` shows the live grid in its cell (and the run's payload with state
    running and its id, for a notebook saved mid-run); with no cell running, the grid keeps
    getting the run's lines, and its Stop (a widget message to the idle kernel) stops the run."""
    k = job_kernel
    r = k.ok("%%remote --detach\n" + TICKS.format(n=600, pause=0.05))
    run_id = run_id_of(r.text)
    displays = [o.content["data"] for o in r.outputs if o.msg_type == "display_data"]
    running = [
        d["application/vnd.monarch.remote+json"]
        for d in displays
        if "application/vnd.monarch.remote+json" in d
    ]
    assert running and running[0]["state"] == "running" and running[0]["run_id"] == run_id, displays
    assert f"%remote attach {run_id}" in r.text
    # static first: the running payload names the grid's model (no widget view in the output)
    assert not any("application/vnd.jupyter.widget-view+json" in d for d in displays), displays
    grids = [p["model_id"] for p in running if "model_id" in p]
    assert len(grids) == 1, displays
    comm_id = grids[0]
    # the kernel is idle now: the grid's updates arrive on IOPub all the same
    arrivals = []
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        try:
            msg = k.kc.get_iopub_msg(timeout=0.2)
        except Exception:
            continue
        if msg["msg_type"] == "comm_msg" and msg["content"]["comm_id"] == comm_id:
            data = msg["content"]["data"]
            if data.get("method") == "custom" and data["content"].get("kind") == "lines":
                arrivals.append((time.monotonic(), data["content"]["lines"]))
    assert len(arrivals) >= 10, arrivals  # ~20 lines a second per rank, sent in batches
    assert arrivals[-1][0] - arrivals[0][0] > 2.0  # spread over the idle time: live, not at the end
    seen = [line for _, lines in arrivals for line in lines.get("0", [])]
    assert all(text.startswith("tick ") for _, text in seen), seen[:5]
    # the grid's Stop: the front end sends {"kind": "stop"}; the idle kernel stops the run
    assert len(commands(tag, "sleep 0.05")) >= 1 or wait_for(lambda: commands(tag, "sleep 0.05"))
    stop = k.kc.session.msg(
        "comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": {"kind": "stop"}}}
    )
    k.kc.shell_channel.send(stop)
    # the run's end replaces the grid's output by its display id while the kernel is idle: a
    # saved notebook says how it ended, not that it "may have ended since"
    ended = None
    deadline = time.monotonic() + 15
    while ended is None and time.monotonic() < deadline:
        try:
            msg = k.kc.get_iopub_msg(timeout=0.2)
        except Exception:
            continue
        if msg["msg_type"] == "update_display_data":
            ended = msg["content"]
    assert ended is not None and ended["transient"]["display_id"] == f"monarch-run-{run_id}"
    assert ended["data"]["application/vnd.monarch.remote+json"]["state"] == "finished", ended
    assert "interrupted" in ended["data"]["text/plain"], ended["data"]["text/plain"]
    wait_for(lambda: not commands(tag, "sleep 0.05"), timeout=15)
    listing = k.ok("%remote runs").text
    assert run_id in listing and "stopped" in listing.split(run_id, 1)[1].splitlines()[0], listing
    # the grid saw the run end while the kernel was idle
    probe = "print('finished', all(f.state.finished for f in get_ipython().magics_manager.registry['RemoteMagics']._followers))"
    wait_for(lambda: "finished True" in k.ok(probe).text, timeout=15)
