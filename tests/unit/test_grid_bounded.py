"""The live grid sends what its view draws: a grouped grid's sync does not grow with the ranks, and
a tile the view starts drawing (a group expanded, a rank selected) still arrives with its lines."""

from __future__ import annotations

import json

from monarch_jupyter.remote.view import model
from monarch_jupyter.widgets.run import RunWidget
from monarch_jupyter.widgets.run_model import PAGE


class Clock:
    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def run_state(n: int) -> model.RunState:
    ranks = [model.RankState(label=f"hosts={i}", mesh="hosts", point={"hosts": i}, rank=i) for i in range(n)]
    return model.RunState(
        command="echo", mode="bash", target=f"mesh hosts ({n} ranks)", ranks=ranks, started=0.0
    )


class Wire:
    """What the widget sends: state updates and custom messages, as JSON (their sizes)."""

    def __init__(self, widget: RunWidget) -> None:
        self.updates: list[dict] = []
        self.messages: list[dict] = []
        widget.send = lambda content, buffers=None: self.messages.append(content)
        original = widget._send

        def send(msg, buffers=None):
            if msg.get("method") == "update":
                self.updates.append(msg["state"])
            return original(msg, buffers)

        widget._send = send

    def largest(self) -> int:
        return max(
            [len(json.dumps(u)) for u in self.updates] + [len(json.dumps(m)) for m in self.messages] + [0]
        )

    def lines_of(self, rank: int) -> list:
        return [
            m for m in self.messages if str(rank) in m.get("lines", {}) or str(rank) in m.get("tails", {})
        ]


def running(n: int, rounds: int, same: bool) -> tuple[model.RunState, RunWidget, Wire, Clock]:
    clock = Clock()
    state = run_state(n)
    widget = RunWidget(state, clock=clock, bounded=True)
    state.observers.append(widget)
    wire = Wire(widget)
    for i in range(n):
        state.apply(model.Started(i))
    for step in range(rounds):
        for i in range(n):
            clock.t += 0.1 / n
            text = f"step {step}\n" if same else f"step {step} rank {i}\n"
            state.apply(model.Output(i, model.OUT, text))
        clock.t += 1.0
        widget.on_tick(state)
    return state, widget, wire, clock


def test_a_grouped_grid_sends_one_tile_whatever_the_ranks():
    sizes = {}
    for n in (256, 4096):
        _state, widget, wire, _ = running(n, 3, same=True)
        assert widget.grouped and [g["count"] for g in widget.groups] == [n]
        assert [t["rank"] for t in widget.tiles] == [0] and widget.tile_count == 1
        assert all(set(m["lines"]) <= {"0"} for m in wire.messages)  # only the group's tile's lines
        assert wire.lines_of(0)[-1]["lines"]["0"][-1] == ["out", "step 2"]
        sizes[n] = wire.largest()
        widget.close()
    assert sizes[4096] < 4_000 and sizes[4096] <= sizes[256] + 64, sizes  # not O(ranks)


def test_distinct_ranks_send_one_page_of_tiles():
    sizes = {}
    for n in (1024, 4096):
        _state, widget, wire, _ = running(n, 2, same=False)
        assert widget.groups == []  # more groups than MAX_GROUPS: the grid pages its tiles
        assert len(widget.tiles) == PAGE and widget.tile_count == n
        assert all(len(m["lines"]) <= PAGE for m in wire.messages)
        sizes[n] = wire.largest()
        widget.close()
    assert sizes[4096] < 1.1 * sizes[1024], sizes


def test_expanding_a_group_while_the_cell_runs_brings_its_tiles_and_lines():
    state, widget, wire, clock = running(64, 3, same=True)
    assert len(widget.tiles) == 1
    # the front end unticks "group identical": read on the shell thread while the cell runs
    widget._on_update({"grouped": False})
    sent = len(wire.messages)
    widget.on_tick(state)  # the next tick sends it (not waiting for the throttle)
    assert [t["rank"] for t in widget.tiles] == list(range(64)) and widget.tile_count == 64
    tails = wire.messages[sent]["tails"]
    assert set(tails) == {str(i) for i in range(1, 64)}  # the ranks newly drawn, with their tails
    assert tails["63"][-1] == ["out", "step 2"] and wire.messages[sent]["earlier"]["63"] == 0
    state.apply(model.Output(63, model.OUT, "more\n"))
    clock.t += 1.0
    widget.on_tick(state)
    assert wire.messages[-1]["lines"]["63"] == [["out", "more"]]  # then new lines only
    widget.close()


def test_a_selected_rank_outside_the_drawn_tiles_comes_as_the_detail():
    state, widget, wire, _clock = running(4096, 2, same=True)
    widget._on_update({"selected": 4000})  # e.g. a tile of the page drawn before a regrouping
    widget.on_tick(state)
    assert widget.detail is not None and widget.detail["rank"] == 4000
    assert [t["rank"] for t in widget.tiles] == [0]
    assert wire.messages[-1]["tails"]["4000"][-1] == ["out", "step 1"]
    widget._on_update({"selected": -1})
    widget.on_tick(state)
    assert widget.detail is None
    widget.close()


def test_a_finished_grid_still_expands():
    state, widget, wire, _clock = running(64, 1, same=True)
    for i in range(64):
        state.apply(model.Exited(i, 0, 1.0))
    state.apply(model.Finished())
    assert widget.finished and widget.state is None and len(widget.tiles) == 1
    assert list(widget.tails) == ["0"]  # a view opened later: the tiles it draws
    widget.grouped = False  # the kernel is idle: the front end's update sets the trait
    assert len(widget.tiles) == 64 and all(t["status"] == "ok" for t in widget.tiles)
    assert set(wire.messages[-1]["tails"]) == {str(i) for i in range(1, 64)}
    widget.close()


def test_the_view_filters_and_pages_in_the_kernel():
    from monarch_jupyter.widgets.grid_fold import GridFold
    from monarch_jupyter.widgets.run_model import GridSync, View

    state = run_state(600)
    fold = GridFold(state.ranks, 0.0)
    sync = GridSync(state, seen_lines=True, fold=fold)
    for i in range(600):
        state.apply(model.Output(i, model.OUT, f"rank {i}\n"))  # every rank its own line
        fold.add(state.last_fed, 0.1)
    for i in (5, 450):
        state.apply(model.Exited(i, 1, 1.0))
    sync.view = View(grouped=True, limit=200)
    batch = sync.take()
    assert batch is not None and batch.groups == []  # 600 groups: too many, the grid pages
    assert [t["rank"] for t in batch.tiles][:3] == [5, 450, 0] and len(batch.tiles) == 200
    assert batch.tiles_total == 600 and set(batch.tails) == {t["rank"] for t in batch.tiles}
    sync.view = View(grouped=True, failing_only=True, limit=200, selected=550)
    batch = sync.take()
    assert [t["rank"] for t in batch.tiles] == [5, 450] and batch.tiles_total == 2
    assert batch.detail is not None and batch.detail["rank"] == 550 and set(batch.tails) == {550}
    assert sync.take() is None  # nothing moved
    sync.view = View(grouped=True, limit=400)
    batch = sync.take()
    assert len(batch.tiles) == 400 and batch.detail is None and batch.detail_changed
    assert len(batch.tails) == 400 - 2  # the two failing ranks stayed drawn


def test_the_event_that_opens_the_grid_is_folded_once():
    from monarch_jupyter.widgets import RemoteRunObserver

    clock = Clock()
    observer = RemoteRunObserver(show_bundle=lambda *a: None, clock=clock)
    state = run_state(16)
    state.observers.append(observer)
    for step in range(4):
        for i in range(16):
            if step == 1 and i == 5:
                clock.t = 0.5  # rank 5's line opens the grid: its lines are the grid's seed
            state.apply(model.Output(i, model.OUT, f"step {step}\n"))
    widget = observer.widget
    clock.t = 5.0
    widget.flush()
    assert [g["count"] for g in widget.groups] == [16], widget.groups  # not hosts=5 on its own
    widget.close()
