"""``%remote stacks`` against a real kernel and real ``--local hosts=2`` workers: Python ranks
named by their frames under their own rank, a bash run's process line, identical ranks folded."""

from __future__ import annotations

import re
import statistics
import time

import pytest

from harness import job_kernel

pytestmark = pytest.mark.kernel

PYTHON = """import os, time
def rank_zero_waits_here():
    time.sleep(120)
def rank_one_waits_here():
    time.sleep(120)
(rank_one_waits_here if os.environ["MONARCH_RANK_hosts"] == "1" else rank_zero_waits_here)()
"""


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("stacks") / "nb", "hosts=2", "%remote true") as kernel:
        yield kernel  # the actors are warm


def run_id_of(text: str) -> str:
    match = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{6})", text)
    assert match, text
    return match.group(1)


def stacks_until(kernel, line: str, *needles: str, timeout: float = 20.0) -> str:
    """``line``'s text once it holds every needle (the run's processes may still be starting)."""
    deadline = time.monotonic() + timeout
    while True:
        text = kernel.ok(line).stream()
        if all(n in text for n in needles) or time.monotonic() > deadline:
            return text
        time.sleep(0.3)


def block(text: str, header: str) -> str:
    """The lines under ``header`` up to the next rank header."""
    lines = text.splitlines()
    start = lines.index(header) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith(" ")), len(lines))
    return "\n".join(lines[start:end])


def test_python_ranks_are_named_by_their_frames_each_under_its_rank(shared):
    run_id = run_id_of(shared.ok("%%remote --detach python\n" + PYTHON).text)
    try:
        text = stacks_until(shared, "%remote stacks", "rank_zero_waits_here", "rank_one_waits_here")
        assert text.splitlines()[0].startswith(f"run {run_id} ("), text
        assert "2 ranks, 2 different stacks" in text.splitlines()[0], text
        zero, one = block(text, "hosts=0:"), block(text, "hosts=1:")
        assert re.search(r"^    pid \d+: \S*python\S* -u -c import os, time⏎…$", zero, re.MULTILINE), text
        assert "rank_zero_waits_here (<string>:3)" in zero and "rank_one_waits_here" not in zero, text
        assert "rank_one_waits_here (<string>:5)" in one and "rank_zero_waits_here" not in one, text
        assert "Thread …" not in one and "Thread " in one  # a group of one keeps its ids
        only = shared.ok(f"%remote stacks {run_id[-6:]} --rank 1").stream()
        assert "hosts=1:" in only and "hosts=0:" not in only and "rank_one_waits_here" in only, only
        native = shared.ok("%remote stacks --point hosts=0 --native").stream()
        assert "rank_zero_waits_here" in native and "hosts=1" not in native, native
        times = []
        for _ in range(5):
            start = time.monotonic()
            shared.ok("%remote stacks")
            times.append(time.monotonic() - start)
        print(f"\n%remote stacks on 2 ranks: median {statistics.median(times):.3f} s of {times}")
    finally:
        shared.ok(f"%remote stop {run_id}")


def test_a_bash_run_shows_its_process_lines_folded(shared):
    run_id = run_id_of(shared.ok("%remote --detach sleep 30").text)
    try:
        text = stacks_until(shared, "%remote stacks", "sleep 30")
        assert text.splitlines()[0] == f"run {run_id} ('sleep 30'): 2 ranks, 1 different stack", text
        assert text.splitlines()[1] == "hosts=[0-1] (2):", text
        assert re.search(r"^    pid …( \S+){2}: sleep 30$", text, re.MULTILINE), text
    finally:
        shared.ok("%remote stop --all")
    assert "no run is running in this context" in shared.ok("%remote stacks").stream()
