"""%load_ext after a restart returns before Monarch is imported; the job attaches in the
background and the first command that needs it waits, interruptibly (real kernel, real workers)."""

from __future__ import annotations

import threading

from harness import worker_pids
from test_job_kernel import assert_quiet, status_of

LOAD = "%load_ext monarch_jupyter\nimport sys\nprint('MONARCH_IMPORTED', 'monarch' in sys.modules)"


def restart(kernel) -> None:
    kernel.km.restart_kernel(now=True)  # as the Restart button: the workers live on
    kernel.kc.wait_for_ready(timeout=60)


def test_load_returns_before_monarch_and_the_first_command_attaches(start_kernel, tag):
    kernel = start_kernel()
    kernel.ok("%load_ext monarch_jupyter")
    kernel.ok("%job apply --local hosts=2")
    _, apply_id, pids = status_of(kernel)
    restart(kernel)

    loaded = kernel.ok(LOAD)
    assert_quiet(loaded)
    line, imported = loaded.stream().strip().splitlines()
    assert line.startswith("monarch_jupyter: re-attaching to context 'default': ProcessJob "), line
    assert f"apply id {apply_id}" in line and "hosts×2 (2 live)" in line
    assert imported == "MONARCH_IMPORTED False", "the load must not wait for Monarch"

    shown = kernel.ok("%job")  # what the files and /proc say, without waiting for the attach (#22)
    assert_quiet(shown)
    assert "running" in shown.text and apply_id in shown.text and "2 live workers" in shown.text
    assert status_of(kernel) == ("running", apply_id, pids)
    ran = kernel.ok("%remote echo hi")  # needs the job: waits for the attach
    assert ran.stream().count("hi") == 2
    assert "MONARCH_IMPORTED True" in kernel.ok(LOAD.split("\n", 1)[1]).text
    assert "attaching in the background" not in kernel.ok("%job").text
    assert sorted(worker_pids(tag)) == sorted(pids), "nothing may be re-applied"
    kernel.ok("%job kill")


SLOW_JOB = """
import os, time
from monarch.job import ProcessJob

if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "SLOW")):
    time.sleep(4)  # unpickling the cached job imports this module: a slow attach, for real


class SlowJob(ProcessJob):
    pass


job = SlowJob({"hosts": 1})
"""


def test_waiting_for_a_slow_attach_is_interruptible_in_one_line(start_kernel, tag, workdir):
    (workdir / "slowjob.py").write_text(SLOW_JOB)
    kernel = start_kernel()
    kernel.ok("%load_ext monarch_jupyter")
    assert "applied" in kernel.ok("%job apply slowjob.job").text
    _, apply_id, pids = status_of(kernel)
    (workdir / "SLOW").touch()
    restart(kernel)

    loaded = kernel.ok(LOAD)
    assert "re-attaching to context 'default': SlowJob" in loaded.text
    assert "MONARCH_IMPORTED False" in loaded.text

    threading.Timer(0.7, kernel.interrupt).start()
    waited = kernel.execute("%job reconnect", timeout=60)  # %job itself answers from the files
    assert waited.error is not None, waited.text
    shown = [line for line in waited.traceback.splitlines() if line.strip()]
    assert len(shown) == 1, waited.traceback
    assert shown[0].startswith(
        "KeyboardInterrupt: stopped waiting for the job of context 'default' to attach"
    )
    assert waited.duration < 3, "the interrupt ends the wait, not the attach"

    (workdir / "SLOW").unlink()
    shown = kernel.ok("%job", timeout=60)  # waits for the rest of the attach, which went on
    assert "running" in shown.text and apply_id in shown.text
    assert status_of(kernel) == ("running", apply_id, pids)
    kernel.ok("%job kill")
