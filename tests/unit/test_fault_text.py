"""actors/fault_text.py: Monarch's supervision text as one compact line."""

from __future__ import annotations

from monarch_jupyter.actors import fault_text

CALL = (
    "Endpoint call sleepers.nap() failed, The actor <root>.<__main__.S sleepers{'gpus': 1/2}> and all its "
    "descendants have failed:\n  the process this actor was running on failed: Killed(sig=9)"
)


def test_a_calls_supervision_error_names_call_rank_and_signal():
    fault = fault_text.parse(CALL)
    assert fault == fault_text.Fault("sleepers.nap", "sleepers", "gpus=1", "killed by SIGKILL")
    assert fault_text.call_line(fault) == "sleepers.nap() failed: gpus=1's process was killed by SIGKILL"


def test_a_report_with_two_dims_and_monarchs_name_suffix():
    report = (
        "The actor logger-tBTvvJHMkij{'hosts': 0/2, 'gpus': 1/2} and all its descendants have failed:\n"
        "  the process this actor was running on failed: Exited(3)"
    )
    fault = fault_text.parse(report)
    assert (fault.mesh, fault.point, fault.cause) == ("logger", "hosts=0,gpus=1", "exited with code 3")
    assert fault_text.call_line(fault) == "logger failed: hosts=0,gpus=1's process exited with code 3"


def test_an_unknown_cause_keeps_monarchs_last_words():
    fault = fault_text.parse("something odd\n  the host failed: connection lost")
    assert fault.cause == "connection lost" and fault.point == ""
    assert fault_text.call_line(fault) == "a mesh failed: its process failed: connection lost"


def test_the_proc_line():
    assert fault_text.proc_line("gpus=1", "anon", 7, "killed by SIGTERM", 4) == (
        "monarch_jupyter: proc gpus=1 of anon (pid 7) died: killed by SIGTERM (during cell [4]); "
        "calls to its actors fail"
    )
    assert "(during" not in fault_text.proc_line("", "anon", 7, "gone", None)


def test_the_hosts_line():
    assert fault_text.hosts_line([11, 12], 4, 6) == (
        "monarch_jupyter: the job's workers (pids 11, 12) are gone, with 4 actor procs (during cell [6]): "
        "calls to their actors fail; %job shows the job, %job apply starts it again"
    )
    assert "worker (pid 11) is gone, with 1 actor proc:" in fault_text.hosts_line([11], 1, None)
