"""The diagnosis aids against a real kernel and real ``--local hosts=2`` workers: quiet
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


def test_grep_finds_lines_by_rank_in_the_log_and_on_the_hosts_of_a_detached_run(shared):
    shared.ok(
        "%%remote python\n"
        "import os, sys\n"
        "r = int(os.environ['MONARCH_RANK_hosts'])\n"
        "for i in range(1, 2001):\n"
        "    print(f'step {i}' + (' loss NaN' if r == 1 and i == 1500 else ''))\n"
        "print('Warning: done', file=sys.stderr)\n"
    )
    text = shared.ok("%remote grep -i nan -C 1").stream()
    lines = text.splitlines()
    assert "/nan/ in 1 of 4 rank streams, 1 line (log .monarch/" in lines[0], text
    assert lines[1:] == [
        "hosts=1:",
        "    1499- step 1499",
        "    1500: step 1500 loss NaN",
        "    1501- step 1501",
    ]
    folded = shared.ok("%remote grep ^Warning --stream err").stream()
    assert "hosts=[0-1] (2), stderr:\n    1: Warning: done\n" in folded, folded
    assert "in 2 of 2 rank streams" in folded, folded
    assert "hosts=0" not in shared.ok("%remote grep step --rank 1 --stream out").stream().split("\n", 1)[1]
    bad = shared.execute("%remote grep '('")
    assert "is not a regular expression" in bad.text and "Traceback" not in bad.text, bad.text

    detached = shared.ok("%%remote --detach\nfor i in 1 2 3; do echo tick $i; done; echo boom >&2\n").text
    run_id = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{6})", detached).group(1)
    deadline = time.monotonic() + 20
    while True:
        text = shared.ok(f"%remote grep 'tick 2|boom' {run_id}").stream()
        if "in 4 of 4" in text or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert "the hosts' files" in text.splitlines()[0], text
    assert (
        "hosts=[0-1] (2):\n    2: tick 2\n" in text and "hosts=[0-1] (2), stderr:\n    1: boom\n" in text
    ), text


def test_diff_shows_the_one_outlier_of_four_ranks_against_the_majority(shared):
    text = shared.ok(
        "%%remote python --per-host gpu=2 --diff\n"
        "import os\n"
        "odd = os.environ['MONARCH_RANK_hosts'] == '1' and os.environ['MONARCH_RANK_gpu'] == '0'\n"
        "print('step 1')\n"
        "print('loss nan' if odd else 'loss 0.5')\n"
        "print('step 2')\n"
    ).text
    diff = text[text.index("--diff:") :].splitlines()
    assert diff[0] == "--diff: hosts=0,gpu=[0-1]; hosts=1,gpu=1 (3) agree; 1 outlier", text
    assert diff[1:3] == ["--- hosts=0,gpu=[0-1]; hosts=1,gpu=1 (3)", "+++ hosts=1,gpu=0"], text
    assert "-loss 0.5" in diff and "+loss nan" in diff and " step 1" in diff, text


def test_group_folds_identical_ranks_while_the_run_streams_and_unfolds_a_diverging_one(shared):
    result = shared.ok(
        "%%remote --group --no-raise python\n"
        "import os, time\n"
        "r = os.environ['MONARCH_RANK_hosts']\n"
        "for i in range(3):\n"
        "    print(f'step {i}', flush=True)\n"
        "    time.sleep(0.4)\n"
        "print('loss nan' if r == '1' else 'loss 0.5', flush=True)\n"
        "time.sleep(1.5)\n"
    )
    folded = [
        (o.t, line)
        for o in result.outputs
        if o.msg_type == "stream"
        for line in o.content["text"].splitlines()
        if line.startswith("[")
    ]
    lines = [line for _, line in folded]
    assert lines[:3] == [
        "[hosts=[0-1] (2)] step 0",
        "[hosts=[0-1] (2)] step 1",
        "[hosts=[0-1] (2)] step 2",
    ], lines
    assert sorted(lines[3:5]) == ["[hosts=0] loss 0.5", "[hosts=1] loss nan"], lines
    # live: step 0 arrived well before the cell's end (the run lasts ≥ 2.7 s)
    assert folded[0][0] < result.duration - 1.5, (folded, result.duration)
    # the end-of-run view would show the same two groups again: one line says so instead
    assert "(--group: same groups as above)\n" in result.stream(), result.stream()
    assert "---------------- hosts=0 (1) ----------------" not in result.stream()


def test_runs_shows_each_ranks_cpu_and_rss_and_flags_the_idle_one(shared):
    detached = shared.ok(
        "%%remote --detach python\n"
        "import os, time\n"
        "if os.environ['MONARCH_RANK_hosts'] == '1':\n"
        "    time.sleep(60)\n"
        "block = bytearray(50_000_000)\n"
        "end = time.monotonic() + 60\n"
        "while time.monotonic() < end:\n"
        "    pass\n"
    ).text
    run_id = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{6})", detached).group(1)
    try:
        deadline = time.monotonic() + 20
        while True:
            text = shared.ok("%remote runs").stream()
            block = text[text.index(run_id) :].split("\n\n")[0]
            if "(idle while others work)" in block or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        line = next((ln.strip() for ln in block.splitlines() if ln.strip().startswith("ranks:")), "")
        assert line.startswith("ranks: hosts=1 cpu 0% rss "), text
        assert "(idle while others work)" in line, text
        busy = re.search(r"hosts=0 cpu (\d+)% rss ([\d.]+) MB", line)
        assert busy and int(busy.group(1)) >= 10 and float(busy.group(2)) >= 50, line
    finally:
        shared.ok(f"%remote stop {run_id}")


def test_timeout_writes_the_stacks_into_the_log_before_it_stops_a_command_ignoring_signals(shared):
    result = shared.execute(
        "%%remote python --timeout 3 --rank 1\n"
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "def deaf_and_stuck_here():\n"
        "    time.sleep(120)\n"
        "deaf_and_stuck_here()\n",
        timeout=90,
    )
    assert result.error and "timed out" in result.text, result.text
    log = log_of(shared, result.text)
    assert "stacks at the timeout (before the run was stopped):" in log, log
    notes = log[log.index("stacks at the timeout") :]
    assert "hosts=1:" in notes and "deaf_and_stuck_here (<string>:5)" in notes, log
    assert notes.index("deaf_and_stuck_here") < notes.index("stopping: timed_out"), log
