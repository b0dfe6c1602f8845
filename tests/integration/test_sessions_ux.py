"""Issue 44's session ergonomics against a real kernel and real workers (2 hosts × 2 procs):
progress bars updated in place (proved by the messages the kernel client receives), pull and
push defaulting to the only session, a live session's start changing nothing, identical
tracebacks folded, sizes in B and the first tensor pull's note."""

from __future__ import annotations

import importlib.util
import re

import pytest

from harness import job_kernel, usage_error

pytestmark = pytest.mark.kernel

PER_HOST = "--per-host gpus=2"
ALL = "hosts=0,gpus=0-1; hosts=1,gpus=0-1"
BAR = """import sys, time
for step in range(41):
    sys.stderr.write(f"\\r{step * 100 // 40:3d}%|{'#' * (step // 4):<10}| {step}/40")
    sys.stderr.flush()
    time.sleep(0.05)
sys.stderr.write("\\n")
print("trained")
"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("sessions_ux") / "nb", "hosts=2") as kernel:
        yield kernel


def pids(result) -> dict[str, str]:
    return dict(re.findall(r"\[([^\]:]+)\] pid (\d+)", result.stream("stdout")))


def test_a_progress_bar_on_four_ranks_is_one_display_updated_in_place(kernel):
    r = kernel.ok(f"%%remote python {PER_HOST}\n" + BAR)
    streams = r.stream()
    # no refresh became a labelled line: each rank's final bar once, in the stream
    assert streams.count("|##########| 40/40") == 4, streams
    assert not re.search(r"\d+%\|[# ]*\| (?!40/40)\d+/40", streams), streams
    assert streams.count("] trained") == 4, streams
    shown = [
        o
        for o in r.outputs
        if o.msg_type == "display_data" and "display_id" in o.content.get("transient", {})
    ]
    bar_ids = {o.content["transient"]["display_id"] for o in shown if "%|" in o.content["data"]["text/plain"]}
    assert len(bar_ids) == 1, [o.content for o in shown]  # one display for every rank's bar
    bar_id = bar_ids.pop()
    updates = [
        o
        for o in r.outputs
        if o.msg_type == "update_display_data" and o.content["transient"]["display_id"] == bar_id
    ]
    texts = [o.content["data"]["text/plain"] for o in updates]
    # updated in place, a line per rank, at a bounded rate (2 s of bars: at most ~4 updates a second)
    assert len(updates) >= 3 and len(updates) <= 4 * r.duration + 4, (len(updates), r.duration)
    assert any(len(t.splitlines()) == 4 for t in texts), texts
    assert all(line.startswith("[hosts=") and ":err] " in line for t in texts for line in t.splitlines()), (
        texts
    )
    assert texts[-1] == "", texts[-1]  # the bars ended: their final lines are in the stream


def test_pull_and_push_default_to_the_only_session_and_name_those_there_are(kernel):
    kernel.ok(
        f"%%remote python --session ddp {PER_HOST}\nimport os\nr = int(os.environ['MONARCH_RANK_gpus'])"
    )
    got = kernel.ok("v = %remote pull r\nprint(list(v))")
    assert "[0, 1, 0, 1]" in got.stream("stdout"), got.text
    pushed = kernel.ok("lr = 0.5\n%remote push lr")
    assert re.search(
        r"pushed lr to 4 ranks of session ddp \(\d+ B pickled per rank", pushed.stream("stdout")
    ), pushed.text
    line = usage_error(kernel.execute("%remote pull --session main r"))
    assert "no session 'main' in this context's job; its sessions: ddp (--session ddp)" in line, line


def test_starting_a_live_session_changes_nothing_and_restart_starts_anew(kernel):
    kernel.ok(f"%%remote python --session live {PER_HOST}\nmarker = 1")
    before = pids(kernel.ok("%%remote python --session live\nimport os\nprint('pid', os.getpid())"))
    again = kernel.ok(f"%remote session start live {PER_HOST}")
    said = again.stream("stdout")
    assert re.search(
        r"session live is live: 4 namespaces, \d+ cells run, since .* ago\); nothing changed", said
    ), said
    kept = kernel.ok("%%remote python --session live\nimport os\nprint('pid', os.getpid(), marker)")
    assert pids(kept) == before and kept.stream("stdout").count(" 1\n") == 4, kept.text
    kernel.ok("%remote session start live --restart")
    after = pids(kernel.ok("%%remote python --session live\nimport os\nprint('pid', os.getpid())"))
    assert sorted(after) == sorted(before) and not set(after.values()) & set(before.values()), (before, after)
    kernel.ok("%remote session stop live")


def test_the_same_traceback_on_every_rank_is_shown_once(kernel):
    r = kernel.execute(f"%%remote python --session tb {PER_HOST}\nx = 1\n{{}}['missing']")
    assert r.error is not None and r.error["ename"] == "RemoteError", r.text
    err = r.stream("stderr")
    assert err.count("Traceback (most recent call last):") == 1, err
    assert f"[{ALL}:err] KeyError: 'missing'" in err, err
    kernel.ok("%remote session stop tb")


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch in the kernel's env")
def test_a_first_tensor_pull_says_it_imports_torch(kernel):
    kernel.ok(f"%%remote python --session tensors {PER_HOST}\nimport torch\nt = torch.ones(2)")
    first = kernel.ok(
        "import sys\nhad = 'torch' in sys.modules\nv = %remote pull --session tensors t\nprint(had, v[0])"
    )
    if "False" in first.stream("stdout"):
        assert "importing torch in this kernel to unpickle the values" in first.stream("stdout"), first.text
    assert "tensor([1., 1.])" in first.stream("stdout"), first.text
    second = kernel.ok("v = %remote pull --session tensors t")
    assert "importing torch" not in second.text, second.text
    kernel.ok("%remote session stop tensors")
