"""#18.11: `.monarch/.lock` held by another process: who holds it, Ctrl-C and a bound, one line each."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from harness import worker_pids

HOLD = "import fcntl, os, sys, time\nfd = os.open('.monarch/.lock', os.O_RDWR | os.O_CREAT, 0o600)\nfcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(120)\n"


@pytest.fixture
def holder(workdir):
    (workdir / ".monarch").mkdir(mode=0o700)
    (workdir / "lock_holder_test.py").write_text(HOLD)
    proc = subprocess.Popen(
        [sys.executable, "lock_holder_test.py"], cwd=workdir, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("line", ["%job apply --local hosts=1", "%job kill"])
def test_ctrl_c_while_another_process_holds_the_lock_is_one_true_line(start_kernel, holder, tag, line):
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    said = threading.Event()

    def on_output(out):
        if out.msg_type == "stream" and "held by" in out.content["text"]:
            said.set()
            k.interrupt()

    result = k.execute(line, timeout=60, on_output=on_output)
    assert said.is_set(), result.text
    text = result.text
    assert (
        f"waiting for .monarch/.lock, held by pid {holder.pid} (" in text and "lock_holder_test.py)" in text
    )
    assert result.error is not None and result.error["traceback"] == [
        f"KeyboardInterrupt: stopped waiting for .monarch/.lock (held by pid {holder.pid} "
        f"({sys.executable} lock_holder_test.py)): nothing was done"
    ]
    assert "nothing was done" in text and "being stopped" not in text and "Traceback" not in text
    assert worker_pids(tag) == []


def test_the_wait_is_bounded(start_kernel, holder):
    k = start_kernel(env={"MONARCH_JUPYTER_LOCK_TIMEOUT": "2"})
    k.ok("%load_ext monarch_jupyter")
    result = k.execute("%job kill", timeout=60)
    said, line = [line for line in result.text.splitlines() if line.strip()]
    assert said.startswith("waiting for .monarch/.lock, held by pid") and line.startswith("UsageError: ")
    assert f"is still held by pid {holder.pid}" in line and "after 2 s: nothing was done" in line
