"""Identical tracebacks across ranks shown once under their rank set (remote/view/tbfold.py and
the cell's renderer); different ones, and everything else, as they came."""

from __future__ import annotations

from monarch_jupyter.remote.view.model import ERR, OUT, Output, RankState, RunState
from monarch_jupyter.remote.view.render import TextRenderer
from monarch_jupyter.remote.view.tbfold import HOLD, WAIT, TracebackFold

TB = (
    "Traceback (most recent call last):\n"
    '  File "<cell>", line 3, in <module>\n'
    "    {}['missing']\n"
    "KeyError: 'missing'\n"
)
CHAINED = (
    "Traceback (most recent call last):\n  File \"x\", line 1\nKeyError: 'a'\n\n"
    "During handling of the above exception, another exception occurred:\n\n"
    'Traceback (most recent call last):\n  File "x", line 2\nValueError: b\n'
)


def _state(hosts: int, gpus: int) -> RunState:
    ranks = [
        RankState(label=f"hosts={h},gpus={g}", mesh="hosts", point={"hosts": h, "gpus": g}, rank=h * gpus + g)
        for h in range(hosts)
        for g in range(gpus)
    ]
    return RunState(command="x", mode="python", target="mesh hosts", ranks=ranks, started=0.0)


def test_the_fold_holds_a_block_and_lets_other_lines_through():
    fold = TracebackFold()
    live = {0, 1, 2}  # rank 2 runs on and never prints it
    assert fold.feed(0, ["before", *TB.splitlines()], 0.0) == ["before"]
    assert fold.feed(1, TB.splitlines(), 0.1) == []
    assert fold.ready(0.2, live) == []  # the exception line may still be followed by a chained one
    assert fold.feed(0, ["after"], 0.2) == ["after"]  # closes rank 0's block
    assert fold.ready(0.1 + HOLD, live) == []  # rank 1's closes now; rank 2 may still print it
    assert fold.ready(0.1 + WAIT - 0.01, live) == []
    [folded] = fold.ready(0.1 + WAIT, live)
    assert folded.lines == tuple(TB.splitlines()) and folded.ranks == [0, 1]
    assert not fold


def test_a_block_is_shown_once_no_running_rank_could_join_it():
    fold = TracebackFold()
    fold.feed(0, TB.splitlines(), 0.0)
    assert fold.ready(0.1, {0, 1}) == []  # rank 0 still runs: a chained block may follow
    fold.feed(1, TB.splitlines(), 0.1)
    [folded] = fold.ready(0.2, set())  # both done: complete, and no one else to wait for
    assert folded.ranks == [0, 1]


def test_a_chained_traceback_is_one_block():
    fold = TracebackFold()
    assert fold.feed(0, CHAINED.splitlines(), 0.0) == []
    [folded] = fold.ready(0.0, force=True)
    assert folded.lines == tuple(CHAINED.splitlines())


def test_four_ranks_same_traceback_shown_once_with_their_rank_set():
    s = _state(2, 2)
    r = TextRenderer(s, tracebacks=True)
    text = r.flush(0.0)
    for i in range(4):
        r.add(s.apply(Output(i, OUT, f"rank {i}\n")))
        r.add(s.apply(Output(i, ERR, TB)))
    text += r.flush(0.1)
    assert "Traceback" not in text and "[hosts=1,gpus=1] rank 3" in text
    text += r.flush(0.1 + HOLD + 0.1)  # every rank printed it: no need to wait for more
    assert text.count("Traceback (most recent call last):") == 1, text
    assert "[hosts=0,gpus=0-1; hosts=1,gpus=0-1:err] Traceback (most recent call last):\n" in text
    assert "[hosts=0,gpus=0-1; hosts=1,gpus=0-1:err] KeyError: 'missing'\n" in text


def test_different_tracebacks_each_under_their_ranks_and_the_end_flushes_them():
    s = _state(1, 2)
    r = TextRenderer(s, tracebacks=True)
    r.add(s.apply(Output(0, ERR, TB)))
    r.add(s.apply(Output(1, ERR, TB.replace("missing", "other"))))
    text = r.finish()  # the run ended before HOLD: nothing held back
    assert "[hosts=0,gpus=0:err] KeyError: 'missing'" in text
    assert "[hosts=0,gpus=1:err] KeyError: 'other'" in text and text.count("Traceback") == 2


def test_without_the_fold_each_rank_prints_its_own():
    s = _state(1, 2)
    r = TextRenderer(s)
    for i in range(2):
        r.add(s.apply(Output(i, ERR, TB)))
    assert r.flush(0.0).count("Traceback") == 2


def test_the_interrupt_summary_says_each_thing_once():
    from monarch_jupyter.remote.view.model import Exited, Finished, Started, Stopping

    s = _state(2, 2)
    for i in range(4):
        s.apply(Started(i, 100 + i))
    s.apply(Stopping("interrupted"))
    for i in range(4):
        s.apply(Exited(i, -2, 1.0, error="KeyboardInterrupt" if i < 3 else None))
    s.apply(Finished("interrupted"))
    line = s.summary_line()
    assert (
        "4 interrupted: hosts=0,gpus=[0-1]; hosts=1,gpus=0 (KeyboardInterrupt), hosts=1,gpus=1 (interrupted"
        in line
    )
    assert "never finished" not in line and not line.endswith("interrupted"), line
    assert line.count("hosts=0,gpus=0") == 0 and line.count("KeyboardInterrupt") == 1, line
    message = s.failure_message()
    assert message is not None and message.count("KeyboardInterrupt") == 1, message


def test_lines_before_the_first_tick_wait_from_that_tick():
    s = _state(1, 2)
    r = TextRenderer(s, tracebacks=True)
    r.add(s.apply(Output(0, ERR, TB)))  # before any flush: the renderer has no time yet
    assert "Traceback" not in r.flush(1000.0)
    r.add(s.apply(Output(1, ERR, TB)))
    text = r.flush(1000.0 + HOLD + 0.1)
    assert text.count("Traceback") == 1 and "[hosts=0,gpus=0-1:err] KeyError" in text, text
