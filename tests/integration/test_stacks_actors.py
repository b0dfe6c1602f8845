"""``%remote stacks --actors`` against a real kernel and real ``--local hosts=2`` workers: the
procs of the user's own actor mesh, one rank stuck in ``time.sleep`` inside a notebook function,
named by its cell and line, the others folded."""

from __future__ import annotations

import re
import statistics
import time

import pytest

from harness import job_kernel, poll

pytestmark = pytest.mark.kernel

ACTOR = """from monarch.actor import Actor, current_rank, endpoint
import time
import monarch_jupyter

def allreduce(rank):
    if rank == 2:
        time.sleep(600)
    return rank

class Trainer(Actor):
    @endpoint
    def step(self) -> int:
        return allreduce(current_rank().rank)

    @endpoint
    def ready(self) -> int:
        return current_rank().rank

procs = monarch_jupyter.state().hosts.spawn_procs(per_host={"gpus": 2})
trainers = procs.spawn("trainers", Trainer)
trainers.ready.call().get()
"""


def line_of(text: str) -> int:
    return next(n for n, line in enumerate(ACTOR.splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("stacks-actors") / "nb", "hosts=2", ACTOR) as kernel:
        yield kernel


def block(text: str, header: str) -> str:
    lines = text.splitlines()
    start = lines.index(header) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith(" ")), len(lines))
    return "\n".join(lines[start:end])


def test_idle_actor_procs_fold_into_one_group(shared):
    text = shared.ok("%remote stacks --actors").stream()
    assert text.splitlines()[0] == "actors (anon): 4 procs, 1 different stack", text
    assert "hosts=[0-1],gpus=[0-1] (4):" in text or "hosts=0,gpus=[0-1]; hosts=1,gpus=[0-1] (4):" in text, (
        text
    )
    assert "(every thread idle in Monarch's loops: no endpoint running there)" in text, text


def test_the_stuck_rank_is_named_by_its_cell_frame_and_the_others_fold(shared):
    cell = shared.ok("fut = trainers.step.call()")  # rank 2 (hosts=1,gpus=0) never returns
    assert cell.error is None
    sleep, call = line_of("time.sleep(600)"), line_of("return allreduce(")

    def stuck() -> str:
        out = shared.ok("%remote stacks --actors").stream()
        return out if "2 different stacks" in out else ""

    text = poll(stuck, timeout=30, step=0.3)
    assert text, shared.ok("%remote stacks --actors").stream()
    assert text.splitlines()[0] == "actors (anon): 4 procs, 2 different stacks", text
    lines = text.splitlines()
    assert lines[1].endswith(" (3):"), text  # the idle ones first, folded
    assert "hosts=1,gpus=0" not in lines[1], text
    stuck_block = block(text, "hosts=1,gpus=0:")
    number = re.search(rf"allreduce \(cell \[(\d+)\] line {sleep}\)\n\s+time\.sleep\(600\)", stuck_block)
    assert number, text
    assert f"Trainer.step (cell [{number[1]}] line {call})" in stuck_block, text
    assert "<dynamic-code>" not in text and "\x1b[" not in text, text
    assert re.search(r"^        pid \d+$", stuck_block, re.MULTILINE) or re.search(
        r"^    pid \d+$", stuck_block, re.MULTILINE
    ), text
    # with no run running, plain `%remote stacks` shows the actors; --rank picks one proc
    assert shared.ok("%remote stacks").stream().splitlines()[0].startswith("actors (anon): 4 procs"), text
    only = shared.ok("%remote stacks --actors --rank 2").stream()
    assert only.splitlines()[0] == "actors (anon): 1 proc, 1 different stack" and "allreduce" in only, only
    times = []
    for _ in range(5):
        start = time.monotonic()
        shared.ok("%remote stacks --actors")
        times.append(time.monotonic() - start)
    print(f"\n%remote stacks --actors on 4 procs: median {statistics.median(times):.3f} s of {times}")


def test_actors_and_a_run_exclude_each_other(shared):
    from harness import usage_error

    assert "RUN or --actors" in usage_error(shared.execute("%remote stacks abc --actors"))
