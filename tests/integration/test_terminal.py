"""What terminals show: a rank's stderr lines on the cell's stderr stream (front ends colour
it), in order with its stdout; in terminal IPython (a real pty), Ctrl-C prints the run's
summary once and a detached run prints no "still running when saved" note."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pexpect
import pytest

from harness import TAG_VAR, Kernel, reap

pytestmark = pytest.mark.kernel
REPO = Path(__file__).resolve().parents[2]
PROMPT = r"In \[\d+\]: "


def test_stderr_lines_go_to_the_stderr_stream_in_order(kernel: Kernel) -> None:
    kernel.ok("%job apply --local hosts=1", timeout=180)
    r = kernel.ok("%%remote\necho one; sleep 0.5; echo two >&2; sleep 0.5; echo three")
    streams = [(o.content["name"], o.content["text"]) for o in r.outputs if o.msg_type == "stream"]
    mine = [(name, text.strip()) for name, text in streams if "[hosts=0" in text]
    assert mine == [
        ("stdout", "[hosts=0] one"),
        ("stderr", "[hosts=0:err] two"),
        ("stdout", "[hosts=0] three"),
    ]
    quick = kernel.ok("%remote echo a; echo b >&2")  # ends in one message: still split by stream
    assert quick.stream("stdout").startswith("[hosts=0] a") and quick.stream("stderr") == "[hosts=0:err] b\n"
    kernel.ok("%job kill")


@pytest.fixture
def ipython(tmp_path: Path, tag: str):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    env.update({TAG_VAR: tag, "TERM": "dumb"})
    child = pexpect.spawn(
        os.path.join(os.path.dirname(sys.executable), "ipython"),
        ["--no-banner", "--colors=NoColor", "--simple-prompt"],
        env=env,
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=120,
    )
    child.expect(PROMPT)
    yield child
    child.terminate(force=True)
    reap(tag)


def run(child: pexpect.spawn, line: str) -> str:
    child.sendline(line)
    child.expect(PROMPT)
    return child.before


def test_terminal_ipython(ipython: pexpect.spawn) -> None:
    for line in ("%load_ext monarch_jupyter", "%job apply --local hosts=1", "%remote true"):
        run(ipython, line)
    ipython.sendline("%remote sleep 30")
    time.sleep(2.0)
    ipython.sendintr()
    ipython.expect(PROMPT)
    shown = ipython.before
    assert shown.count("1 interrupted") == 1, shown  # the summary, once
    assert "KeyboardInterrupt: %%remote stopped on every rank" in shown, shown
    detached = run(ipython, "%remote --detach sleep 2")
    assert "started detached" in detached and "still running when saved" not in detached, detached
    run(ipython, "%job kill")
