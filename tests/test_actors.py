"""The user's own actors against a real kernel and real workers (``--local hosts=2``).

One kernel and job are shared by the module's tests (spawning is the slow part).
"""

from __future__ import annotations

import re

import pytest

from harness import scratch_kernel

ACTOR = """from monarch.actor import Actor, ActorError, endpoint, current_rank
import monarch_jupyter

def check(rank):
    if rank == 0:
        raise ValueError(f"bad value on rank {rank}")
    return {}[rank]

class Worker(Actor):
    @endpoint
    def boom(self) -> int:
        rank = current_rank().rank
        return check(rank)

    @endpoint
    def same(self) -> int:
        raise RuntimeError("the same on every rank")

procs = monarch_jupyter.state().hosts.spawn_procs()
workers = procs.spawn("workers", Worker)
"""


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    folder = tmp_path_factory.mktemp("actors") / "nb"
    folder.mkdir()
    with scratch_kernel("actors", folder=folder, kill=True) as kernel:
        kernel.ok("%load_ext monarch_jupyter")
        kernel.ok("%job apply --local hosts=2")
        kernel.ok(ACTOR)
        yield kernel


@pytest.mark.parametrize("call", ["workers.boom.call().get()", "await workers.boom.call()"])
def test_two_ranks_raising_different_errors_show_both_with_the_cells_lines(shared, call):
    r = shared.execute(call)
    assert r.error is not None and r.error["ename"] == "ActorError"
    text = r.traceback
    lines = text.splitlines()
    assert lines[0] == "ActorError: workers.boom() failed on 2 of 2 ranks (hosts=0-1): ValueError, KeyError"
    assert r.error["evalue"] == lines[0].removeprefix("ActorError: ")
    assert re.match(r"  called from cell \[\d+\] line 1: " + re.escape(call), lines[1]), lines[1]
    assert "── rank hosts=0: ValueError: bad value on rank 0" in text
    assert "── rank hosts=1: KeyError: 1" in text
    # frames of the notebook-defined class are the cell and line they came from, with the source
    cell = re.search(r"cell \[(\d+)\] line 13, in Worker.boom\n    return check\(rank\)", text)
    assert cell, text
    assert f"cell [{cell[1]}] line 6, in check\n    raise ValueError" in text
    assert f"cell [{cell[1]}] line 7, in check\n    return {{}}[rank]" in text
    for noise in ("<dynamic-code>", "Future.get", "handle_sync", "\x1b["):
        assert noise not in text, noise


def test_identical_errors_are_grouped_once(shared):
    r = shared.execute("workers.same.call().get()")
    text = r.traceback
    assert (
        text.splitlines()[0] == "ActorError: workers.same() failed on 2 of 2 ranks (hosts=0-1): RuntimeError"
    )
    assert "── ranks hosts=0-1 (2): RuntimeError: the same on every rank" in text
    assert text.count("Traceback (most recent call last):") == 1


def test_code_that_catches_the_error_gets_the_original_and_every_rank(shared):
    r = shared.ok(
        "try:\n"
        "    workers.boom.call().get()\n"
        "except ActorError as e:\n"
        "    f = monarch_jupyter.actors.failure(e)\n"
        "    print(f.original is e, f.size, [(r.label, r.last.type) for r in f.ranks])\n"
    )
    assert r.stream("stdout").strip() == "True 2 [('hosts=0', 'ValueError'), ('hosts=1', 'KeyError')]"
    # what a caught call reported does not leak into the next failing cell
    r = shared.execute("workers.same.call().get()")
    assert "KeyError" not in r.traceback and "ranks hosts=0-1 (2)" in r.traceback
