"""How a worker, proc or namespace ended, said in one line (pure parts and the kernel-log read)."""

from __future__ import annotations

import signal

from monarch_jupyter.remote.run import runner
from monarch_jupyter.remote.view import liveness
from monarch_jupyter.runtime import chatter
from monarch_jupyter.system import procfs


def test_wait_statuses_and_return_codes_in_words():
    assert procfs.wait_status_text(signal.SIGKILL) == "killed by SIGKILL"
    assert procfs.wait_status_text(3 << 8) == "exited with code 3"
    assert procfs.returncode_text(-9) == "killed by SIGKILL"
    assert procfs.returncode_text(137) == "exited with code 137"


def test_the_oom_killer_is_found_in_the_kernel_log_by_pid(tmp_path):
    log = tmp_path / "kmsg"
    log.write_text("6,1,2,-;Out of memory: Killed process 4242 (python) total-vm:1kB\n")
    assert procfs.oom_killed(4242, str(log))
    assert not procfs.oom_killed(424, str(log))  # not a prefix of another pid
    assert not procfs.oom_killed(4242, str(tmp_path / "none"))  # unreadable: nothing claimed


def test_a_lost_rank_says_how_its_worker_ended():
    evidence = liveness.Evidence(liveness.GONE, 12, cause="killed by SIGKILL")
    assert liveness.lost_reason(evidence) == "worker process 12 died (killed by SIGKILL)"
    assert liveness.lost_reason(liveness.Evidence(liveness.GONE, 12)) == "worker process 12 died"


def test_a_rust_backtrace_stays_out_of_the_cell():
    error = RuntimeError(
        "proc stopped: no status received from process\nstack backtrace:\n   0: hyperactor::x"
    )
    text = chatter.error_text(error)
    assert (
        text
        == "RuntimeError: proc stopped: no status received from process (Rust backtrace in the debug log)"
    )
    assert len(chatter.error_text(RuntimeError("x" * 5000))) < 700


def test_only_a_slow_start_is_tried_again():
    assert runner._slow_start(RuntimeError("SupervisionError: stopped: no status received from process"))
    assert runner._slow_start(TimeoutError())
    assert not runner._slow_start(RuntimeError("ModuleNotFoundError: no module named x"))
