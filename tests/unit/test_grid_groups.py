"""The live grid's grouped tiles, its Stacks and resources requests, without a kernel or browser."""

from __future__ import annotations

import threading
import time

from monarch_jupyter.remote.view import model
from monarch_jupyter.widgets import busy_comm
from monarch_jupyter.widgets.grid_fold import GridFold, runs
from monarch_jupyter.widgets.run import RunWidget
from monarch_jupyter.widgets.run_model import GridSync, tile_json


class Clock:
    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def run_state(n: int, observers=()) -> model.RunState:
    ranks = [model.RankState(label=f"hosts={i}", mesh="hosts", point={"hosts": i}, rank=i) for i in range(n)]
    return model.RunState(
        command="echo",
        mode="bash",
        target=f"mesh hosts ({n} ranks)",
        ranks=ranks,
        started=100.0,
        observers=list(observers),
        run_id="20260101-000000-abcd",
    )


def feed(state: model.RunState, fold: GridFold, index: int, text: str, now: float) -> None:
    state.apply(model.Output(index, model.OUT, text))
    fold.add(state.last_fed, now)


def groups_of(state: model.RunState, fold: GridFold) -> list[tuple[str, str]]:
    tiles = [tile_json(i, r) for i, r in enumerate(state.ranks)]
    return [(g["label"], g["status"]) for g in fold.groups(tiles)]


def test_runs():
    assert runs([0, 1, 2, 5, 7, 8]) == [[0, 2], [5, 5], [7, 8]]
    assert runs([]) == []


def test_identical_ranks_share_a_tile_and_a_diverging_one_unfolds():
    state = run_state(9)
    fold = GridFold(state.ranks, 0.0)
    for i in range(9):
        feed(state, fold, i, "step 1\n", 0.1)
    assert groups_of(state, fold) == [("hosts=[0-8] (9)", "running")]
    for i in range(9):
        feed(state, fold, i, "step 2\n" if i != 7 else "step 2 (slow)\n", 0.2)
    assert groups_of(state, fold) == [("hosts=[0-6,8] (8)", "running"), ("hosts=7", "running")]
    # a rank one line behind stays in its group (output identical so far) …
    for i in range(9):
        if i not in (3, 7):
            feed(state, fold, i, "step 3\n", 0.3)
    assert groups_of(state, fold)[0] == ("hosts=[0-6,8] (8)", "running")
    # … until it lagged HOLD seconds: then it goes on by itself
    fold.tick(2.0)
    assert ("hosts=3", "running") in groups_of(state, fold)


def test_failing_ranks_first_then_the_largest_group():
    state = run_state(6)
    fold = GridFold(state.ranks, 0.0)
    for i in range(6):
        feed(state, fold, i, "same\n", 0.1)
    state.apply(model.Exited(4, 3, 1.0))
    state.apply(model.Exited(5, 3, 1.0))
    tiles = [tile_json(i, r) for i, r in enumerate(state.ranks)]
    got = fold.groups(tiles)
    assert [(g["label"], g["status"], g["failing"], g["ranks"]) for g in got] == [
        ("hosts=[4-5] (2)", "failed", True, [[4, 5]]),
        ("hosts=[0-3] (4)", "running", False, [[0, 3]]),
    ]
    fold.idle = frozenset({2})  # an idle rank is split off and comes right after the failing ones
    assert [(g["label"], g["idle"]) for g in fold.groups(tiles)][1] == ("hosts=2", True)


def test_a_grid_opened_late_groups_the_lines_so_far():
    state = run_state(4)
    for i in range(4):
        state.apply(model.Output(i, model.OUT, "a\nb\n" if i < 3 else "a\nc\n"))
    fold = GridFold(state.ranks, 0.0)
    assert groups_of(state, fold) == [("hosts=[0-2] (3)", "running"), ("hosts=3", "running")]


def test_grid_sync_sends_groups_when_they_change():
    state = run_state(3)
    fold = GridFold(state.ranks, 0.0)
    sync = GridSync(state, fold=fold)
    first = sync.take()
    assert first is not None and first.groups is not None and first.groups[0]["label"] == "hosts=[0-2] (3)"
    assert sync.take() is None
    feed(state, fold, 1, "different\n", 0.1)
    batch = sync.take()
    assert batch is not None and [g["count"] for g in batch.groups] == [2, 1]


def test_4096_identical_ranks_are_one_group_and_cheap():
    n = 4096
    state = run_state(n)
    fold = GridFold(state.ranks, 0.0)
    t0 = time.thread_time()
    for step in range(10):
        for i in range(n):
            feed(state, fold, i, f"step {step}\n", step * 0.1)
    tiles = [tile_json(i, r) for i, r in enumerate(state.ranks)]
    got = fold.groups(tiles)
    spent = time.thread_time() - t0
    assert [(g["label"], g["count"]) for g in got] == [("hosts=[0-4095] (4096)", 4096)]
    print(f"40,960 lines over 4,096 ranks through the fold + one grouping: {spent:.2f} s CPU")


class FakeComm:
    def __init__(self) -> None:
        self.routed = []

    def _reply_subshell_for(self, data, default):
        self.routed.append(data)
        return default


def test_serve_while_busy_wraps_the_routing_hook_and_keeps_routing():
    comm = FakeComm()
    served = []
    done = threading.Event()

    def serve(content):
        served.append(content["id"])
        done.set()

    assert busy_comm.serve_while_busy(comm, lambda c: c.get("kind") == "stacks", serve)
    assert (
        comm._reply_subshell_for({"method": "custom", "content": {"kind": "stacks", "id": "a"}}, "sub")
        == "sub"
    )
    assert comm._reply_subshell_for({"method": "update", "state": {}}, None) is None
    assert done.wait(5) and served == ["a"]
    assert len(comm.routed) == 2  # every message still routed as before
    assert not busy_comm.serve_while_busy(object(), lambda c: True, serve)  # no hook: nothing wrapped


def test_served_once():
    served = busy_comm.Served(limit=2)
    assert served.take("a") and not served.take("a")
    assert served.take("b") and served.take("c") and served.take("a")  # the oldest forgotten


def test_run_widget_answers_stacks_and_usage_once():
    asked = []

    def stacks(run_id, ranks):
        asked.append((run_id, ranks))
        return "hosts=1:\n    pid 1: sleep 30\n"

    def usage(run_id):
        return [
            {"key": "hosts", "rank": 0, "cpu": 99.0, "rss": 2e8, "gpu_mib": None, "idle": False},
            {"key": "hosts", "rank": 1, "cpu": 0.0, "rss": 1e8, "gpu_mib": None, "idle": True},
        ]

    clock = Clock(10.0)
    widget = RunWidget(run_state(2), clock=clock, stacks=stacks, usage=usage)
    assert widget.can_stacks and widget.can_usage
    sent = []
    widget.send = lambda content, buffers=None: sent.append(content)
    widget._serve({"kind": "stacks", "id": "s1", "ranks": [1]})
    widget._serve({"kind": "stacks", "id": "s1", "ranks": [1]})  # the main thread's copy, later
    assert asked == [("20260101-000000-abcd", [1])]
    assert sent == [{"kind": "stacks", "id": "s1", "ranks": [1], "text": "hosts=1:\n    pid 1: sleep 30\n"}]
    widget._serve({"kind": "usage", "id": "u1"})
    assert sent[-1]["ranks"]["1"] == {"cpu": 0.0, "rss": 1e8, "gpu_mib": None, "idle": True}
    widget._serve({"kind": "usage", "id": "u2"})  # within a second: not sampled again
    assert sent[-1] == {"kind": "usage", "id": "u2", "ranks": {}, "skipped": True}
    assert widget._fold.idle == frozenset({1})
    widget._serve({"kind": "stacks", "id": "s2", "ranks": [9]})
    assert sent[-1]["error"] == "no such rank"

    def broken(run_id, ranks):
        raise RuntimeError("the job went away\nmore")

    widget._stacks = broken
    widget._serve({"kind": "stacks", "id": "s3", "ranks": [0]})
    assert sent[-1]["error"] == "RuntimeError: the job went away"
    widget.close()


def test_large_grids_start_grouped():
    small, large = RunWidget(run_state(2)), RunWidget(run_state(64))
    assert not small.grouped and large.grouped
    assert not small.can_stacks  # no stacks callback: no button
    small.close()
    large.close()
