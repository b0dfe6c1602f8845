"""_quiet.quietly drops Monarch's banner and nothing else (fd level, in a child process)."""

import subprocess
import sys

SCRIPT = r"""
import os, threading, time
from monarch_jupyter.runtime import chatter as _quiet

def other():
    for i in range(5):
        os.write(1, b"thread line %d\n" % i)
        time.sleep(0.02)

with _quiet.quietly():
    t = threading.Thread(target=other)
    t.start()
    os.write(2, b"Monarch internal logs are being written to /tmp/x.log; execution id 1\n")
    os.write(2, b"real error: worker failed\n")
    os.write(1, b"a prompt without newline")
    time.sleep(0.3)
    t.join()
os.write(1, b"\nafter\n")
"""


def run(script):
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)


def test_only_the_banner_is_dropped_and_other_threads_are_heard():
    done = run(SCRIPT)
    assert done.returncode == 0, done.stderr
    assert "Monarch internal logs" not in done.stderr
    assert "real error: worker failed" in done.stderr
    for i in range(5):
        assert f"thread line {i}\n" in done.stdout
    assert "a prompt without newline" in done.stdout and done.stdout.endswith("after\n")


def test_client_context_banner_is_dropped():
    done = run(
        "from monarch_jupyter.runtime import chatter as _quiet\n_quiet.start_client_context()\nprint('ready')"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ready\n"
    assert "Monarch internal logs" not in done.stderr


CHILD_KEEPS_PIPE = r"""
import subprocess, sys, time
from monarch_jupyter.runtime import chatter as _quiet

with _quiet.quietly():
    child = subprocess.Popen(["sh", "-c", "sleep 0.5; echo child after the window"])
    started = time.monotonic()
print("window closed in %.2f s" % (time.monotonic() - started), flush=True)
child.wait()
time.sleep(0.3)
"""


def test_a_child_holding_the_pipe_does_not_hold_the_window_and_is_still_heard():
    done = run(CHILD_KEEPS_PIPE)
    assert done.returncode == 0, done.stderr
    closed = float(done.stdout.split("window closed in ")[1].split()[0])
    assert closed < 0.4, done.stdout  # not the child's 0.5 s
    assert "child after the window" in done.stdout
