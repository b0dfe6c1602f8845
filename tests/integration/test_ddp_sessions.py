"""Sessions where distributed PyTorch breaks, against real kernels, real workers and real torch
(2 hosts × 2 procs, ``--torch``, gloo on the CPU): one rank raises before a collective while the
others block in it, Ctrl-C inside a collective, the way out (``%remote session unblock``) with
training going on after it, and a namespace that had to start anew said in every later cell."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from harness import job_kernel

pytestmark = pytest.mark.kernel

DDP = "%%remote python --session ddp\n"
RANKS = ["hosts=0,gpus=0", "hosts=0,gpus=1", "hosts=1,gpus=0", "hosts=1,gpus=1"]
SETUP = (
    DDP + "import torch, torch.distributed as dist\n"
    "from torch.nn.parallel import DistributedDataParallel as DDP\n"
    "dist.init_process_group('gloo')\n"
    "torch.manual_seed(0)\n"
    "model = DDP(torch.nn.Linear(32, 1))\n"
    "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n"
    "generator = torch.Generator().manual_seed(dist.get_rank())\n"
    "marker = 100 + dist.get_rank()\n"
    "def step():\n"
    "    x = torch.randn(64, 32, generator=generator)\n"
    "    loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()\n"
    "    optimizer.zero_grad(); loss.backward(); optimizer.step()\n"
    "    return loss.item()\n"
    "step()"
)


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("ddp") / "nb", "hosts=2") as kernel:
        kernel.ok("%remote session start ddp --torch --per-host gpus=2", timeout=240)
        kernel.ok(SETUP, timeout=240)
        yield kernel


def markers(kernel) -> str:
    return kernel.ok(DDP + "marker").stream("stdout")


def assert_every_namespace_kept(kernel) -> None:
    """Each rank still holds what the setup cell made (never an empty namespace in its place)."""
    seen = markers(kernel)
    for rank, label in enumerate(RANKS):
        assert f"{label} (1): {100 + rank}" in seen, seen


def assert_training_goes_on(kernel) -> None:
    """10 more DDP steps on every rank, then every rank holds the same weights."""
    kernel.ok(DDP + "losses = [step() for _ in range(10)]\nlen(losses)", timeout=120)
    weights = kernel.ok("w = %remote pull --session ddp model.module.weight.detach().tolist()\nw").text
    # identical values are folded into one line naming all four ranks
    assert "hosts=0,gpus=[0-1]; hosts=1,gpus=[0-1] (4): [[" in weights, weights


def interrupt_after(kernel, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, kernel.interrupt)
    timer.start()
    return timer


def test_one_rank_raises_before_a_collective_the_others_are_named_live_and_kept(ddp):
    sent = {}

    def on_output(out) -> None:
        text = out.content.get("text", "")
        if "ValueError: bad batch" in text:
            sent.setdefault("failed", out.t)
        if "still running" in text and "after hosts=1,gpus=0 failed" in text:
            sent.setdefault("named", out.t)
            sent["line"] = text

    timer = threading.Timer(8.0, ddp.interrupt)
    timer.start()
    try:
        r = ddp.execute(
            DDP + "if dist.get_rank() == 2:\n    raise ValueError('bad batch')\n"
            "t = torch.ones(1)\ndist.all_reduce(t)\nt",
            timeout=120,
            on_output=on_output,
        )
    finally:
        timer.cancel()
    # named live, before anyone pressed Ctrl-C: who waits, where, and the way out
    assert "named" in sent and sent["named"] < 8.0, r.text
    line = sent["line"]
    assert "hosts=0,gpus=[0-1]; hosts=1,gpus=1 still running" in line, line
    assert "all_reduce (gloo) at cell line 5" in line, line
    assert "%remote session unblock ddp" in line, line
    # after Ctrl-C the cell ends saying which ranks are still blocked; nothing is killed
    assert r.error is not None
    assert "blocked in all_reduce (gloo)" in r.error["evalue"], r.error["evalue"]
    assert "%remote session unblock ddp frees them" in r.error["evalue"], r.error["evalue"]
    busy = ddp.execute(DDP + "marker")
    assert "%remote session unblock ddp frees it" in busy.text, busy.text
    freed = ddp.ok("%remote session unblock ddp", timeout=120).stream("stdout")
    assert "freed hosts=0,gpus=[0-1]; hosts=1,gpus=1 (blocked in all_reduce (gloo)" in freed, freed
    assert "process group made anew (gloo, 4 ranks" in freed and "DDP wrapped again on it: model" in freed
    assert_every_namespace_kept(ddp)
    assert_training_goes_on(ddp)


def test_ctrl_c_inside_a_collective_keeps_every_namespace(ddp):
    for _ in range(2):
        timer = interrupt_after(ddp, 2.0)
        try:
            r = ddp.execute(DDP + "n = 0\nwhile True:\n    step(); n += 1", timeout=120)
        finally:
            timer.cancel()
        assert r.error is not None, r.text
        assert "did not stop in time" not in r.text, r.text
        ddp.ok("%remote session unblock ddp", timeout=120)
        assert_every_namespace_kept(ddp)
    assert_training_goes_on(ddp)


def test_ranks_in_different_collectives_are_a_mismatch_said_live(ddp):
    ddp.ok("%remote session start mm --torch", timeout=240)
    ddp.ok(
        "%%remote python --session mm\nimport torch, torch.distributed as dist\ndist.init_process_group('gloo')"
    )
    seen = {}

    def on_output(out) -> None:
        if "collective mismatch" in out.content.get("text", ""):
            seen.setdefault("line", out.content["text"])

    timer = interrupt_after(ddp, 16.0)
    try:
        r = ddp.execute(
            "%%remote python --session mm\nif dist.get_rank() == 0:\n    dist.all_reduce(torch.ones(1))\n"
            "else:\n    dist.broadcast(torch.ones(1), 0)",
            timeout=120,
            on_output=on_output,
        )
    finally:
        timer.cancel()
    assert "hosts=0 in all_reduce (gloo); hosts=1 in broadcast (gloo)" in seen.get("line", ""), r.text
    ddp.ok("%remote session unblock mm", timeout=120)
    # with the check on, torch itself raises at the first mismatch, shapes included
    ddp.ok("%remote session start chk --torch --check-collectives", timeout=240)
    r = ddp.execute(
        "%%remote python --session chk\nimport torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\ndist.all_reduce(torch.ones(1 + dist.get_rank()))",
        timeout=120,
    )
    assert r.error and "Detected mismatch between collectives" in r.error["evalue"], r.text
    ddp.ok("%remote session stop mm")
    ddp.ok("%remote session stop chk")


def test_a_namespace_started_anew_is_said_in_every_later_cell_and_in_ls(ddp):
    ddp.ok(DDP + "import os")
    pids = {
        label: int(pid)
        for label, pid in re.findall(
            r"(hosts=\d,gpus=\d) \(1\): (\d+)", ddp.ok(DDP + "os.getpid()").stream("stdout")
        )
    }
    assert set(pids) == set(RANKS), pids
    os.kill(pids["hosts=0,gpus=1"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pids['hosts=0,gpus=1']}/stat"):
        time.sleep(0.05)
    for _ in range(2):  # every later cell, not just the first
        r = ddp.execute(DDP + "1 + 1")
        said = [line for line in r.text.splitlines() if "started anew" in line]
        assert len(said) == 1 and said[0].startswith("[hosts=0,gpus=1:err]"), r.text
        assert "killed by SIGKILL" in said[0] and "its variables from before are lost" in said[0], said
    ls = ddp.ok("%remote session ls").stream("stdout")
    assert "started anew, variables lost: hosts=0,gpus=1" in ls, ls
    # a restart of the whole session is the clean state again: nothing said any more
    ddp.ok("%remote session restart ddp", timeout=240)
    again = ddp.ok(DDP + "1 + 1")
    assert "started anew" not in again.text, again.text
    assert "started anew" not in ddp.ok("%remote session ls").stream("stdout")


def test_the_tutorial_runs_again_on_its_live_session(tmp_path):
    """notebooks/interactive_ddp.ipynb twice in one kernel, as a user who runs it again: the live
    session is kept (no "default process group twice"), every cell but the tagged failures passes."""
    notebook = json.loads((Path(__file__).parents[2] / "notebooks" / "interactive_ddp.ipynb").read_text())
    cells = [
        (cell["metadata"].get("tags", []), "".join(cell["source"]))
        for cell in notebook["cells"]
        if cell["cell_type"] == "code"
    ]
    last = cells.pop()  # the closing cell ends the session and the job: once, at the end
    assert "%job kill" in last[1]
    with job_kernel(tmp_path / "nb", "hosts=2") as kernel:
        for round_ in (1, 2):
            for tags, source in cells:
                r = kernel.execute(source, timeout=300)
                if "raises-exception" in tags:
                    assert r.error is not None, (round_, source, r.text)
                else:
                    assert r.error is None, (round_, source, r.traceback)
                if round_ == 2 and source.startswith("%remote session start ddp"):
                    assert "session ddp is live" in r.text and "nothing changed" in r.text, r.text
        kernel.ok(last[1], timeout=120)
