"""\\r progress bars (tqdm, Keras) in a ``%%remote`` cell: one line per rank, updated in place at
a bounded rate, never a new labelled line per refresh; the stream holds each final line once."""

from __future__ import annotations

import itertools

from monarch_jupyter.remote.view.model import ERR, OUT, Output, RankState, RunState
from monarch_jupyter.remote.view.render import PROGRESS_EVERY, TextRenderer


def _state(n: int) -> RunState:
    ranks = [RankState(label=f"hosts={i}", mesh="hosts", point={"hosts": i}, rank=i) for i in range(n)]
    return RunState(command="x", mode="python", target="mesh hosts", ranks=ranks, started=0.0)


def _bar(done: int) -> str:
    return f"\r{done:3d}%|{'#' * (done // 10):<10}|"


def test_a_bar_on_two_ranks_is_one_updated_view_and_each_final_line_once():
    s = _state(2)
    r = TextRenderer(s, progress=True)
    stream: list[str] = []
    views: list[tuple[float, str]] = []
    t = 0.0
    for step in range(0, 101):  # 100 refreshes a rank, one every 10 ms: 1 s
        t = step / 100
        for i in range(2):
            r.add(s.apply(Output(i, ERR, _bar(step))))
        stream.append(r.flush(t))
        view = r.take_progress(t)
        if view is not None:
            views.append((t, view))
    for i in range(2):
        r.add(s.apply(Output(i, ERR, "\n")))  # tqdm's close
        r.add(s.apply(Output(i, OUT, "done\n")))
    stream.append(r.finish())
    end = r.take_progress(t + 0.01, force=True)
    text = "".join(stream)
    assert "%|" not in text.replace("100%|##########|", ""), text  # no refresh became a line
    assert text.count("[hosts=0:err] 100%|##########|\n") == 1 and text.count("[hosts=1:err] 100%") == 1
    assert "[hosts=1] done\n" in text
    # the view: both ranks' bars, one line each, updated at most every PROGRESS_EVERY
    assert 2 <= len(views) <= 1 / PROGRESS_EVERY + 2, views
    assert all(b - a >= PROGRESS_EVERY for (a, _), (b, _) in itertools.pairwise(views))
    last = views[-1][1].splitlines()
    assert [line.split("]")[0] for line in last] == ["[hosts=0:err", "[hosts=1:err"], last
    assert end == ""  # every bar ended: the view empties, the stream has the final lines


def test_an_unfinished_bar_stays_in_the_view_at_the_end_and_prompts_stay_in_the_stream():
    s = _state(1)
    r = TextRenderer(s, progress=True)
    r.add(s.apply(Output(0, OUT, "name? ")))  # a prompt: no \r, shown in the stream as it stands
    assert r.flush(0.0) == ""
    assert r.flush(0.3) == "[hosts=0] name? \n"
    r.add(s.apply(Output(0, OUT, "x\n")))
    r.add(s.apply(Output(0, ERR, "\r 10%|#")))
    r.flush(0.4)
    assert r.take_progress(0.4) is None  # a bar shows after PARTIAL_AFTER, as any unfinished line
    r.flush(0.7)
    assert r.take_progress(0.7) == "[hosts=0:err]  10%|#\n"
    r.add(s.apply(Output(0, ERR, "\r 20%|##")))
    r.flush(0.8)
    assert r.take_progress(0.8) is None  # too soon
    assert r.take_progress(1.0) == "[hosts=0:err]  20%|##\n"
    assert r.take_progress(1.5) is None  # unchanged


def test_without_in_place_the_bar_is_shown_as_before():
    s = _state(1)
    r = TextRenderer(s)  # %remote attach, actors' output: no view to update
    r.add(s.apply(Output(0, ERR, "\r 10%|#")))
    r.flush(0.0)
    assert r.flush(0.3) == "[hosts=0:err]  10%|#\n"
    assert r.take_progress(0.3) is None


def test_a_tile_shows_its_bar_as_its_last_line_re_read_at_most_every_quarter_second():
    from monarch_jupyter.widgets.run_model import GridSync, tile_json

    s = _state(2)
    sync = GridSync(s)
    now = [0.0]
    sync.clock = lambda: now[0]
    sync.take()
    s.apply(Output(0, ERR, _bar(10)))
    assert tile_json(0, s.ranks[0])["progress"] == " 10%|#         |"
    assert tile_json(1, s.ranks[1])["progress"] is None
    batch = sync.take()
    assert batch is not None and batch.tiles is not None and batch.tiles[0]["progress"] == " 10%|#         |"
    s.apply(Output(0, ERR, _bar(20)))
    now[0] = 0.1
    first = sync.take()
    assert first is None or first.tiles is None  # too soon: the tiles are not read again
    now[0] = 0.3
    batch = sync.take()
    assert batch is not None and batch.tiles is not None and batch.tiles[0]["progress"] == " 20%|##        |"
    s.apply(Output(0, ERR, "\n"))  # the bar ended: the tile's last line is the finished one again
    now[0] = 0.6
    batch = sync.take()
    assert batch is not None and batch.tiles is not None and batch.tiles[0]["progress"] is None
