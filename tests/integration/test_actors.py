"""The user's own actors against a real kernel and real workers (``--local hosts=2``).

One kernel and job are shared by the module's tests (spawning is the slow part).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness import job_kernel

# the module's shared kernel is no `kernel` fixture, so conftest cannot mark these from their fixtures
pytestmark = pytest.mark.kernel

ACTOR = """from monarch.actor import Actor, ActorError, endpoint, current_rank
import logging, sys, time
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

    @endpoint
    def talk(self, pause: float) -> int:
        rank = current_rank().rank
        print(f"start {rank}")
        logging.getLogger("user").warning(f"logged {rank}")
        print(f"to stderr {rank}", file=sys.stderr)
        time.sleep(pause)
        print(f"end {rank}", end="")  # the very last thing, without a newline
        return rank

procs = monarch_jupyter.state().hosts.spawn_procs()
workers = procs.spawn("workers", Worker)
"""


def line_of(text: str) -> int:
    """The line of ACTOR (as run in its cell) holding ``text``."""
    return next(n for n, line in enumerate(ACTOR.splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("actors") / "nb", "hosts=2", ACTOR) as kernel:
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
    boom, raise_, lookup = (line_of(t) for t in ("return check(rank)", "raise ValueError", "return {}[rank]"))
    cell = re.search(rf"cell \[(\d+)\] line {boom}, in Worker.boom\n    return check\(rank\)", text)
    assert cell, text
    assert f"cell [{cell[1]}] line {raise_}, in check\n    raise ValueError" in text
    assert f"cell [{cell[1]}] line {lookup}, in check\n    return {{}}[rank]" in text
    for noise in ("<dynamic-code>", "Future.get", "handle_sync", "\x1b["):
        assert noise not in text, noise


def test_identical_errors_are_grouped_once(shared):
    r = shared.execute("workers.same.call().get()")
    # IPython's own tools still see the error
    assert "ActorError" in shared.ok("import sys; print(sys.last_type.__name__)").stream()
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


def stamps(result) -> dict[str, float]:
    """Each labelled line of the cell's stdout → when it arrived (seconds after the request)."""
    found = {}
    for o in result.outputs:
        if o.msg_type == "stream":
            for line in o.content["text"].splitlines():
                found.setdefault(line, o.t)
    return found


def assert_live_output(kernel, handle: str = "workers", ranks: int = 2) -> None:
    r = kernel.ok(f"{handle}.talk.call(1.5).get()")
    got = stamps(r)
    assert r.duration > 1.5
    for rank in range(ranks):  # each came while the call still ran: it sleeps 1.5 s after them
        # (a first call also waits for its procs to start: measured from the cell's end)
        out, err = f"[hosts={rank}]", f"[hosts={rank}:err]"
        for line in (f"{out} start {rank}", f"{err} logged {rank}", f"{err} to stderr {rank}"):
            assert r.duration - got[line] > 1.0, (line, got[line], r.duration)
    text = r.stream("stdout")
    assert "similar log lines" not in text and "[vm " not in text
    log = kernel.ok("print(monarch_jupyter.actors.log_path())").stream().strip()
    logged = Path(log).read_text()
    assert "[hosts=0] start 0\n" in logged and f"[hosts={ranks - 1}:err] to stderr {ranks - 1}\n" in logged
    # nothing lands in the next cells, not even each rank's unfinished last line ("end N")
    nxt = kernel.ok("time.sleep(0.5); print('next cell')")
    assert nxt.stream() == "next cell\n", nxt.stream()


def test_prints_and_logging_arrive_live_in_the_cell_labelled_by_rank(shared):
    assert_live_output(shared)


def test_output_after_a_kernel_restart_and_reattach(start_kernel, workdir):
    # and without the harness's PYTHONUNBUFFERED, as a user's kernel runs: a print needs no flush
    kernel = start_kernel(env={"PYTHONUNBUFFERED": ""})
    assert kernel.ok("import os; print(repr(os.environ['PYTHONUNBUFFERED']))").stream() == "''\n"
    kernel.ok("%load_ext monarch_jupyter")
    kernel.ok("%job apply --local hosts=2")
    kernel.restart()
    kernel.ok("%load_ext monarch_jupyter")
    kernel.ok(ACTOR)
    assert_live_output(kernel)
    kernel.execute("%job kill", timeout=60)


def test_output_can_be_turned_off_for_procs_spawned_later(shared):
    shared.ok(
        "monarch_jupyter.actors.live_output(False)\n"
        "quiet = monarch_jupyter.state().hosts.spawn_procs().spawn('quiet', Worker)\n"
        "monarch_jupyter.actors.live_output(True)"
    )
    r = shared.ok("quiet.talk.call(0.1).get()")
    assert r.stream() == "", r.stream()


def test_remote_and_monarchs_own_forwarding_still_work(shared):
    r = shared.ok("%remote echo hi")
    lines = [line for line in r.stream("stdout").splitlines() if line != "starting the ranks…"]
    assert sorted(lines) == ["[hosts=0] hi", "[hosts=1] hi"], r.stream()
    assert ":err]" not in r.stream()  # %%remote's own procs are not captured as actor output
    # Monarch's forwarding dup2's the kernel's fds 1/2 onto its pipes: ours is not on fds
    shared.ok("await procs.logging_option(stream_to_client=True, aggregate_window_sec=None)")
    r = shared.ok("workers.talk.call(1.2).get()")
    got = stamps(r)
    assert r.duration - got["[hosts=0] start 0"] > 0.8 and r.duration - got["[hosts=1:err] logged 1"] > 0.8
    r = shared.ok("%remote echo again")
    assert "[hosts=0] again" in r.stream("stdout") and "[hosts=1] again" in r.stream("stdout")
    shared.ok("await procs.logging_option(stream_to_client=False)")


def test_ssh_job_actor_output_and_errors_from_both_hosts(sshd, start_kernel, workdir):
    from test_ssh import write_jobs

    write_jobs(workdir, sshd)
    kernel = start_kernel()
    kernel.ok("%load_ext monarch_jupyter")
    kernel.ok("%job apply jobs.ssh2", timeout=120)
    kernel.ok(ACTOR, timeout=120)
    assert_live_output(kernel)
    r = kernel.execute("workers.boom.call().get()")
    assert "failed on 2 of 2 ranks (hosts=0-1): ValueError, KeyError" in r.traceback, r.traceback
    kernel.execute("%job kill", timeout=60)


def test_a_call_failing_again_in_the_same_cell_shows_each_rank_once(shared):
    r = shared.execute(
        "try:\n    workers.boom.call().get()\nexcept ActorError:\n    pass\nworkers.boom.call().get()"
    )
    assert "failed on 2 of 2 ranks (hosts=0-1): ValueError, KeyError" in r.traceback, r.traceback
    assert r.traceback.count("── rank hosts=0:") == 1 and r.traceback.count("── rank hosts=1:") == 1


def test_slurm_job_actor_output_and_errors(slurm, start_kernel, workdir):
    from daemons import free_port
    from test_slurm import write_jobs

    write_jobs(workdir, free_port())
    kernel = start_kernel(env=slurm.env)
    kernel.ok("%load_ext monarch_jupyter")
    kernel.ok("%job apply sjobs.one", timeout=180)
    kernel.ok(ACTOR, timeout=120)
    assert_live_output(kernel, ranks=1)
    r = kernel.execute("workers.boom.call().get()")
    assert "failed on 1 of 1 ranks (hosts=0): ValueError" in r.traceback, r.traceback
    kernel.execute("%job kill", timeout=60)


def test_a_sliced_mesh_keeps_every_dim_that_tells_its_ranks_apart(shared):
    shared.ok("grid = monarch_jupyter.state().hosts.spawn_procs(per_host={'gpus': 2}).spawn('grid', Worker)")
    r = shared.execute("grid.slice(gpus=0).same.call().get()")
    head = r.traceback.splitlines()[0]
    assert (
        head
        == "ActorError: grid.same() failed on 2 of 2 ranks (hosts=0,gpus=0; hosts=1,gpus=0): RuntimeError"
    ), head
    r = shared.execute("grid.slice(hosts=1).same.call().get()")
    head = r.traceback.splitlines()[0]
    assert head == "ActorError: grid.same() failed on 2 of 2 ranks (hosts=1,gpus=0-1): RuntimeError", head
    r = shared.ok("grid.slice(gpus=0).talk.call(0).get()")
    starts = sorted(line for line in r.stream("stdout").splitlines() if "start" in line)
    assert starts == ["[hosts=0,gpus=0] start 0", "[hosts=1,gpus=0] start 1"], r.text  # rank in the slice
