"""What a run of thousands of ranks costs stays bounded: the cell folds, the saved payload, the
grid's opening tails and each grid batch are bounded (``benchmarks/bench_scale.py`` measures it)."""

from __future__ import annotations

import json
import re

from monarch_jupyter.remote.view import render
from monarch_jupyter.remote.view.model import (
    ERR,
    OUT,
    Exited,
    Finished,
    Output,
    RankState,
    RunState,
)
from monarch_jupyter.remote.view.render import SHOW_RANKS, TextRenderer
from monarch_jupyter.widgets.run_model import BATCH_TOTAL, OPEN_TOTAL, GridSync, sync_interval, tails


def state(n: int) -> RunState:
    ranks = [RankState(label=f"hosts={i}", mesh="hosts", point={"hosts": i}, rank=i) for i in range(n)]
    return RunState(command="x", mode="bash", target=f"mesh hosts ({n} ranks)", ranks=ranks, started=0.0)


def shown_ranks(text: str) -> set[str]:
    return set(re.findall(r"^\[(hosts=\d+)(?::err)?\] +(?!…)", text, re.M))


def test_a_write_shows_at_most_show_ranks_ranks_and_folds_the_rest():
    s = state(1000)
    r = TextRenderer(s)
    for i in range(1000):
        r.add(s.apply(Output(i, OUT, f"out {i}\n")))
    r.add(s.apply(Output(700, ERR, "boom\n")))
    text = r.flush(0.0)
    assert len(shown_ranks(text)) == SHOW_RANKS
    assert "[hosts=700:err]" in text  # stderr is shown first
    assert f"… {1000 - SHOW_RANKS} more ranks printed {1000 - SHOW_RANKS} lines (they are in the log)" in text
    seen = shown_ranks(text)
    for i in range(1000):  # the next write shows other ranks: every rank gets its turn
        r.add(s.apply(Output(i, OUT, f"again {i}\n")))
    assert not (shown_ranks(r.flush(1.0)) - {"hosts=700"}) & (seen - {"hosts=700"})


def test_few_ranks_are_not_folded():
    s = state(SHOW_RANKS)
    r = TextRenderer(s)
    for i in range(SHOW_RANKS):
        r.add(s.apply(Output(i, OUT, f"out {i}\n")))
    text = r.flush(0.0)
    assert len(shown_ranks(text)) == SHOW_RANKS and "more ranks printed" not in text


def test_the_end_of_a_run_shows_the_tails_of_at_most_show_ranks_capped_ranks():
    s = state(100)
    r = TextRenderer(s, live_lines=5)
    for i in range(100):
        r.add(s.apply(Output(i, OUT, "".join(f"{i}-{k}\n" for k in range(10)))))
        r.flush(float(i))
    for i in range(100):
        s.apply(Exited(i, 1 if i == 99 else 0, 1.0))
    text = r.finish()
    assert "[hosts=99] … last" in text  # the failing rank first
    assert text.count("… last") == SHOW_RANKS
    assert f"the last lines of {100 - SHOW_RANKS} more ranks are in the log" in text


def test_the_saved_payload_and_html_are_bounded():
    s = state(4096)
    for i in range(4096):
        s.apply(Output(i, OUT, "".join(f"step {k} loss 0.1234 lr 3e-4\n" for k in range(100))))
        s.apply(Exited(i, 0 if i else 3, 1.0))
    s.apply(Finished())
    mime = s.to_mime()
    assert len(json.dumps(mime)) < 2_000_000
    assert all(r["truncated"] == 100 - len(r["lines"]) and r["lines"] for r in mime["ranks"])
    html = s.to_html()
    assert html.count("<tr>") == 64 + 2  # head, 64 ranks, the row saying how many more
    assert "hosts=0<" in html and "… 4032 more ranks" in html  # the failing rank is listed


def test_a_small_payload_keeps_whole_tails():
    s = state(2)
    s.apply(Output(0, OUT, "".join(f"{k}\n" for k in range(150))))
    assert len(s.to_mime()["ranks"][0]["lines"]) == 150


def test_tails_and_grid_batches_are_bounded_in_all():
    s = state(4096)
    sync = GridSync(s, seen_lines=True)
    assert sync.take() is not None
    for i in range(4096):
        s.apply(Output(i, OUT, "".join(f"{k}\n" for k in range(60))))
    total = sum(len(lines) for lines in tails(s).values())
    assert 4096 <= total <= max(OPEN_TOTAL, 4096)  # at least each rank's last line
    batch = sync.take()
    assert sum(len(v) for v in batch.lines.values()) <= max(BATCH_TOTAL, 4096)
    assert sum(batch.dropped.values()) + sum(len(v) for v in batch.lines.values()) == 4096 * 60


def test_grid_reads_tiles_only_when_a_rank_moved():
    s = state(3)
    sync = GridSync(s)
    assert sync.take().tiles is not None
    s.apply(Output(0, OUT, "a\n"))  # starts rank 0: a tile change
    assert sync.take().tiles is not None
    s.apply(Output(0, OUT, "b\n"))  # more output of a running rank: none
    batch = sync.take()
    assert batch.tiles is None and batch.lines == {0: [["out", "b"]]}
    s.apply(Exited(0, 0, 1.0))
    assert [t["status"] for t in sync.take().tiles] == ["ok", "pending", "pending"]


def test_sync_interval_grows_past_256_ranks():
    assert sync_interval(64) == sync_interval(256) == 0.05
    assert sync_interval(1024) == 0.2 and sync_interval(100_000) == 1.0
    assert render.SHOW_RANKS >= 8


def test_lines_kept_in_memory_are_bounded_for_the_whole_run():
    from monarch_jupyter.remote.view.lines import TAIL_LINES
    from monarch_jupyter.remote.view.model import RUN_TAIL_MIN

    small, big = state(64), state(4096)
    for s in (small, big):
        for i in (0, len(s.ranks) - 1):
            s.apply(Output(i, OUT, "".join(f"{k}\n" for k in range(500))))
    assert len(small.ranks[0].lines) == TAIL_LINES
    assert len(big.ranks[0].lines) == RUN_TAIL_MIN and big.ranks[-1].lines.last(1) == [("out", "499")]
    assert big.ranks[0].total_lines == 500 and big.ranks[0].truncated == 500 - RUN_TAIL_MIN
