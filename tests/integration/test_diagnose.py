"""Issue 19's diagnosis aids against a real kernel and real ``--local hosts=2`` workers: quiet
ranks, ``%remote grep``, ``--diff``, live ``--group`` folding, per-rank resources and the stacks
``--timeout`` writes into the run log."""

from __future__ import annotations

import re
import time

import pytest

from harness import job_kernel

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("diagnose") / "nb", "hosts=2", "%remote true") as kernel:
        yield kernel  # the actors are warm


def log_of(kernel, text: str) -> str:
    match = re.search(r"log (\S+\.log)", text)
    assert match, text
    return (kernel.cwd / match.group(1)).read_text()


def test_a_silent_rank_is_flagged_while_it_runs_and_named_when_the_run_is_stopped(shared):
    cell = (
        "%%remote python --quiet-after 1.5 --timeout 6 --no-raise\n"
        "import os, sys, time\n"
        "quiet = os.environ['MONARCH_RANK_hosts'] == '1'\n"
        "for i in range(60):\n"
        "    if not quiet: print(i, flush=True)\n"
        "    time.sleep(0.1)\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    result = shared.execute(cell, timeout=60)
    stamps = [o for o in result.outputs if o.msg_type == "stream" and "quiet for" in o.content["text"]]
    assert stamps, result.text
    note = next(line for line in stamps[0].content["text"].splitlines() if "quiet for" in line)
    assert re.fullmatch(r"hosts=1 quiet for [1-4] s; 1 other printing", note), result.text
    # while the run goes on: before rank 0 stops printing (6 s in) and long before the timeout
    assert stamps[0].t < 5.5, (stamps[0].t, result.text)
    assert re.search(r"never finished: .*hosts=1 \(quiet \d+ s\)", result.text), result.text
    assert time.monotonic() - start < 30
