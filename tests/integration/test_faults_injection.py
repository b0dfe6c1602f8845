"""Fault injection: hostile files, killed processes, interrupts, races.

Real kernels, real workers, a real ``jupyter server``. Every test ends by
checking that no process carrying its tag is left (the kernel included), and
the ``tag`` fixture reaps by PID whatever a failing test left behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from harness import Kernel, tagged_pids, usage_error, worker_pids
from harness import poll as wait_for
from monarch_jupyter.jobs import signing as _signing
from test_server_ext import TOKEN, _get, server  # noqa: F401 - the server fixture, on our tree


def one_line(result) -> str:
    text = result.text.strip()
    assert len(text.splitlines()) == 1, text
    return text


def shutdown_and_assert_nothing_left(tag: str, *kernels: Kernel) -> None:
    for k in kernels:
        with contextlib.suppress(Exception):
            k.shutdown()
    left = wait_for(lambda: not tagged_pids(tag), timeout=10) or tagged_pids(tag)
    assert left is True, f"processes left: {left}"


def context(workdir: Path, name: str = "default") -> Path:
    ctx = workdir / ".monarch" / name
    ctx.mkdir(parents=True, exist_ok=True)
    link = workdir / ".monarch" / "job_state.pkl"
    if not link.is_symlink():
        link.symlink_to(f"{name}/state.pkl")
    return ctx


# ── the server ────────────────────────────────────────────────────────────
@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A server root whose only context has a FIFO for status.json."""
    root = tmp_path_factory.mktemp("fifo-root")
    ctx = root / "proj" / ".monarch" / "default"
    ctx.mkdir(parents=True)
    os.mkfifo(ctx / "status.json")
    (ctx / "spec").write_text("monarch_jupyter.local_jobs.hosts_2")
    os.symlink("default/state.pkl", root / "proj" / ".monarch" / "job_state.pkl")
    return root


def test_server_fifo_status_does_not_freeze_the_server(server):  # noqa: F811
    results = {}

    def poll(n):
        results[n] = _get(f"{server}/monarch-jupyter/contexts")

    threads = [threading.Thread(target=poll, args=(n,), daemon=True) for n in range(3)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert all(not t.is_alive() for t in threads), "the contexts route blocked on a FIFO"
    assert time.monotonic() - start < 15
    for code, body in results.values():
        assert code == 200
        (ctx,) = body["contexts"]
        assert ctx["dir"] == "proj/.monarch/default" and ctx["state"] == "unknown" and ctx["status"] is None
    # and the rest of the server still answers
    with urllib.request.urlopen(f"{server}/api/status?token={TOKEN}", timeout=5) as response:
        assert response.status == 200


# ── hostile files on the kernel side ─────────────────────────────────────
def test_fifo_state_and_other_contexts_fifo_status_do_not_hang_the_kernel(start_kernel, workdir, tag):
    ctx = context(workdir)
    os.mkfifo(ctx / "state.pkl", 0o600)
    other = context(workdir, "other")
    os.mkfifo(other / "status.json", 0o600)
    k = start_kernel()
    loaded = k.execute("%load_ext monarch_jupyter", timeout=30)
    assert "a FIFO, not a regular file" in one_line(loaded)
    assert "FIFO" in usage_error(k.execute("%job", timeout=30))
    assert "FIFO" in usage_error(k.execute("%job kill", timeout=30))
    listing = k.ok("%job context ls", timeout=30).text
    assert "other" in listing
    shutdown_and_assert_nothing_left(tag, k)


@pytest.mark.parametrize("content", [b"", b"\x80\x04\x95garbage", b"\x80\x04\x95\x10\x00\x00"])
def test_unreadable_cache_is_recovered_from_the_notebook(start_kernel, workdir, tag, content):
    ctx = context(workdir)
    (ctx / "state.pkl").write_bytes(content)
    (ctx / "state.pkl").chmod(0o600)
    _signing.sign(ctx / "state.pkl", content)  # our own cache, corrupted
    k = start_kernel()
    assert "moves it aside" in one_line(k.ok("%load_ext monarch_jupyter"))
    killed = one_line(k.ok("%job kill"))
    assert "moved the unusable .monarch/default/state.pkl (owner " in killed
    (moved,) = ctx.glob("state.pkl.unreadable-*")
    assert moved.read_bytes() == content and not (ctx / "state.pkl").exists()
    # the same through %job apply
    (ctx / "state.pkl").write_bytes(content)
    (ctx / "state.pkl").chmod(0o600)
    _signing.sign(ctx / "state.pkl", content)  # our own cache, corrupted
    applied = k.ok("%job apply --local hosts=1").text
    assert "applied: context 'default'" in applied and "moved the unusable" in applied
    assert len(list(ctx.glob("state.pkl.unreadable-*"))) == 2
    assert len(worker_pids(tag)) == 1
    k.ok("%job kill")
    assert wait_for(lambda: not worker_pids(tag), 10)
    shutdown_and_assert_nothing_left(tag, k)


def test_loose_permissions_above_the_context_and_a_foreign_spec_run_no_code(start_kernel, workdir, tag):
    marker = workdir / "pwned"
    (workdir / "evil.py").write_text(
        f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n"
        "from monarch.job import ProcessJob\njob = ProcessJob({'hosts': 1})\n"
    )
    ctx = context(workdir)
    (ctx / "spec").write_text("evil.job")
    (ctx / "spec").chmod(0o666)
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    assert "spec is writable by group/others" in usage_error(k.execute("%job apply"))
    assert not marker.exists()
    # a pickle that runs code, fine itself, under a .monarch/ anyone can write
    (ctx / "spec").chmod(0o644)
    (ctx / "state.pkl").write_bytes(b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR.")
    (ctx / "state.pkl").chmod(0o600)
    (workdir / ".monarch").chmod(0o777)
    assert ".monarch is writable by group/others" in usage_error(k.execute("%job"))
    assert not marker.exists()
    (workdir / ".monarch").chmod(0o755)
    shutdown_and_assert_nothing_left(tag, k)


@pytest.mark.parametrize("target", ["../state.pkl", "/tmp/elsewhere/state.pkl"])
def test_odd_active_link_is_diagnosed(start_kernel, workdir, tag, target):
    (workdir / ".monarch" / "default").mkdir(parents=True)
    (workdir / ".monarch" / "job_state.pkl").symlink_to(target)
    k = start_kernel()
    line = one_line(k.ok("%load_ext monarch_jupyter"))
    assert f"job_state.pkl points to {target!r}" in line and "%job context use default" in line
    assert "job_state.pkl points to" in usage_error(k.execute("%job"))
    k.ok("%job context use default")
    assert "no job" in k.ok("%job").text
    shutdown_and_assert_nothing_left(tag, k)


def test_bad_local_specs_are_one_line(kernel, tag):
    assert "unexpected word 'extra'" in usage_error(kernel.execute("%job apply --local hosts=2 extra"))
    many = ",".join(f"m{i}=1" for i in range(300))
    message = usage_error(kernel.execute(f"%job apply --local {many}"))
    assert "300 worker processes in all" in message and "MONARCH_JUPYTER_MAX_LOCAL_WORKERS" in message
    assert worker_pids(tag) == []
    shutdown_and_assert_nothing_left(tag, kernel)


# ── interrupted and killed applies ───────────────────────────────────────
def _start_apply(k: Kernel, hosts: int) -> str:
    return k.kc.execute(f"%job apply --local hosts={hosts}")


def _drain(k: Kernel, msg_id: str, timeout: float = 60) -> dict | None:
    """Wait for the cell to go idle; return its error content, if any."""
    deadline = time.monotonic() + timeout
    error = None
    while time.monotonic() < deadline:
        try:
            msg = k.kc.get_iopub_msg(timeout=1)
        except Exception:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "error":
            error = msg["content"]
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return error
    raise TimeoutError("cell did not finish")


def test_interrupted_apply_leaves_no_workers(start_kernel, workdir, tag):
    k = start_kernel(env={"MONARCH_JUPYTER_MAX_LOCAL_WORKERS": "100"})
    k.ok("%load_ext monarch_jupyter")
    seen: set[int] = set()
    watching = threading.Event()
    watching.set()

    def watch():  # every worker PID that ever exists during the test
        while watching.is_set():
            seen.update(worker_pids(tag))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    msg_id = _start_apply(k, 64)
    assert wait_for(lambda: len(seen) >= 2, 60), "no worker started"
    k.interrupt()
    error = _drain(k, msg_id)
    # a direct scan too: the watcher's last poll may lag behind what ran before the cell ended
    seen.update(worker_pids(tag))
    at_interrupt = len(seen)
    assert error is not None and error["ename"] == "Interrupted", error
    assert error["traceback"] == [
        "KeyboardInterrupt: %job apply interrupted: the workers it started are being stopped; "
        "%job shows which job the context has now"
    ]
    assert wait_for(lambda: not worker_pids(tag), 30), f"workers left: {worker_pids(tag)}"
    watching.clear()
    watcher.join()
    # spawning stopped with the interrupt: not all 64 workers were started
    # (without the guard Monarch's spawn loop runs to the end before the cell ends)
    assert len(seen) < 64 and len(seen) - at_interrupt <= 2, (at_interrupt, len(seen))
    # the loop's worker removes the record once it has reaped what it started (after the cell ended)
    pending = workdir / ".monarch" / "default"
    assert wait_for(lambda: not list(pending.glob("workers.pending.*")), 10), list(pending.glob("*"))
    assert "no job" in k.ok("%job").text
    # the kernel is usable: a small apply works
    k.ok("%job apply --local hosts=1")
    assert len(worker_pids(tag)) == 1
    k.ok("%job kill")
    shutdown_and_assert_nothing_left(tag, k)


def test_kernel_killed_mid_apply_workers_are_reaped_next_load(start_kernel, workdir, tag):
    k = start_kernel(env={"MONARCH_JUPYTER_MAX_LOCAL_WORKERS": "100"})
    k.ok("%load_ext monarch_jupyter")
    _start_apply(k, 40)
    assert wait_for(lambda: len(worker_pids(tag)) >= 3, 60), "no worker started"
    os.kill(k.km.provisioner.process.pid, signal.SIGKILL)
    time.sleep(0.5)
    orphans = worker_pids(tag)
    assert orphans, "the workers died with the kernel: nothing to reap"
    k.kc.stop_channels()
    fresh = start_kernel()
    line = fresh.ok("%load_ext monarch_jupyter").text
    assert re.search(r"stopped \d+ worker process\(es\) left by an apply that never completed", line), line
    assert wait_for(lambda: not worker_pids(tag), 10), f"workers left: {worker_pids(tag)}"
    assert not list((workdir / ".monarch" / "default").glob("workers.pending.*"))
    shutdown_and_assert_nothing_left(tag, k, fresh)


def test_kill_9_a_worker_mid_run_then_kill_reaps_all(start_kernel, tag):
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=2")
    victim = []

    def on_output(out):
        if not victim and out.msg_type == "stream" and "tick 2" in out.content.get("text", ""):
            victim.append(sorted(worker_pids(tag))[-1])
            os.kill(victim[0], signal.SIGKILL)

    r = k.execute("%%remote\nfor i in 1 2 3 4 5; do echo tick $i; sleep 0.3; done", on_output=on_output)
    assert victim and r.error is not None
    assert "died" in r.error["evalue"]
    k.ok("%job kill")
    assert wait_for(lambda: not worker_pids(tag), 10)
    shutdown_and_assert_nothing_left(tag, k)


def test_full_disk_for_the_run_log_does_not_hang(start_kernel, tag):
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=1")
    k.ok("%remote true")
    # The kernel may write at most 64 KB per file from now on (Python ignores
    # SIGXFSZ, so writes fail with EFBIG): the run log fills up mid-run.
    k.ok("import resource; resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.RLIM_INFINITY))")
    start = time.monotonic()
    r = k.execute("%remote seq 1 100000", timeout=60)
    assert time.monotonic() - start < 60
    assert r.error is None or "\n" not in r.error["evalue"].strip(), r.traceback
    assert "[hosts=0] 100000" in r.text  # the cell's own output is whole
    k.ok(
        "import resource; resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))"
    )
    assert k.ok("%remote echo still-here").text.count("still-here") >= 1
    k.ok("%job kill")
    shutdown_and_assert_nothing_left(tag, k)


# ── two kernels at once ──────────────────────────────────────────────────
def _both(a: Kernel, b: Kernel, code_a: str, code_b: str, timeout: float = 120):
    ids = (a.kc.execute(code_a), b.kc.execute(code_b))
    return _drain(a, ids[0], timeout), _drain(b, ids[1], timeout)


def test_two_kernels_racing_end_with_one_job(start_kernel, workdir, tag):
    a, b = start_kernel(), start_kernel()
    a.ok("%load_ext monarch_jupyter")
    b.ok("%load_ext monarch_jupyter")
    for _ in range(2):
        errors = _both(a, b, "%job apply --local hosts=2", "%job apply --local hosts=2")
        assert errors == (None, None), errors
        assert len(worker_pids(tag)) == 2, "two applies at once started two jobs"
        ids = {re.search(r"apply id\s+(\S+)", k.ok("%job").text).group(1) for k in (a, b)}
        assert len(ids) == 1, ids
        # kill and apply, switch and kill, at the same moment
        _both(a, b, "%job kill", "%job context use exp\n%job context use default")
        assert wait_for(lambda: len(worker_pids(tag)) in (0, 2), 10)
        _both(a, b, "%job kill", "%job kill")
        assert wait_for(lambda: not worker_pids(tag), 10), worker_pids(tag)
        assert os.readlink(workdir / ".monarch" / "job_state.pkl") == "default/state.pkl"
        assert not (workdir / ".monarch" / "default" / "state.pkl").exists()
        assert not [p for p in (workdir / ".monarch" / "default").iterdir() if p.name.endswith(".tmp")]
    shutdown_and_assert_nothing_left(tag, a, b)


def test_record_of_a_completed_apply_does_not_reap_the_job(start_kernel, workdir, tag):
    """A kernel killed after writing the cache but before removing its worker
    record: the next kernel re-attaches to those workers instead of killing them."""
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=1")
    (pid,) = worker_pids(tag)
    ctx = workdir / ".monarch" / "default"
    record = ctx / "workers.pending.999999"  # a kernel that is gone
    environ = dict(
        e.split(b"=", 1) for e in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in e
    )
    token = environ[b"MONARCH_JUPYTER_APPLY"].decode()  # every worker of an apply carries its token
    record.write_text(f"owner 999999 1\ntoken {token} -\nworker {pid} 1\n")
    record.chmod(0o600)
    os.utime(record, ns=(1, 1))  # older than state.pkl
    k.shutdown()
    fresh = start_kernel()
    assert "re-attach" in fresh.ok("%load_ext monarch_jupyter").text
    assert worker_pids(tag) == [pid] and not record.exists()
    fresh.ok("%job kill")
    shutdown_and_assert_nothing_left(tag, fresh)


def test_full_disk_run_log_is_reported(start_kernel, tag):
    k = start_kernel()
    try:
        k.ok("%load_ext monarch_jupyter")
        k.ok("%job apply --local hosts=1")
        k.ok("%remote true")
        k.ok("import resource; resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.RLIM_INFINITY))")
        r = k.execute("%remote seq 1 100000", timeout=60)
        k.ok(
            "import resource; resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))"
        )
        assert re.search(r"(?i)log.*(incomplete|could not be written|file too large|no space)", r.text), (
            r.text[-300:]
        )
    finally:
        k.execute("%job kill", timeout=30)
        shutdown_and_assert_nothing_left(tag, k)
