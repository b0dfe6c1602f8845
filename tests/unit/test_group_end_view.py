"""``--group``'s end-of-run view (render.group_end_text): one line when the live fold already
showed exactly those groups, the ``clush -b`` view otherwise."""

from __future__ import annotations

from monarch_jupyter.remote.view.model import OUT, Exited, Finished, Output, RankState, RunState
from monarch_jupyter.remote.view.render import SAME_GROUPS, TextRenderer, group_end_text


def state_of(n: int) -> RunState:
    ranks = [RankState(label=f"hosts={i}", mesh="hosts", point={"hosts": i}, rank=i) for i in range(n)]
    return RunState(
        command="x", mode="bash", target="mesh hosts", ranks=ranks, started=0.0, clock=lambda: 0.0
    )


def run(writes: list[list[str]], codes: list[int], live: bool = True) -> str:
    """``writes``: each moment's text of every rank (a flush after each), then the exit codes."""
    state = state_of(len(codes))
    renderer = TextRenderer(state, fold=True, live=live)
    for t, texts in enumerate(writes):
        for index, text in enumerate(texts):
            renderer.add(state.apply(Output(index, OUT, text)))
        renderer.flush(1.0 + 0.1 * t)
    for index, code in enumerate(codes):
        state.apply(Exited(index, code, 1.0))
    state.apply(Finished())
    renderer.finish()
    return group_end_text(state, renderer)


def test_the_same_groups_as_the_live_fold_are_one_line():
    assert run([["a\n"] * 3], [0, 0, 0]) == SAME_GROUPS
    assert run([["a\n"] * 3, ["b\n", "b\n", "c\n"]], [0, 0, 0]) == SAME_GROUPS
    assert "same groups as above" in SAME_GROUPS and SAME_GROUPS.count("\n") == 1


def test_other_groups_keep_the_clush_view():
    # same output, different exit codes: the end view tells them apart, the live fold did not
    text = run([["a\n"] * 2], [0, 3])
    assert "---------------- hosts=1 (1) · failed, rc 3 ----------------" in text, text
    # no live view: nothing was shown above
    assert run([["a\n"] * 2], [0, 0], live=False).startswith("---------------- hosts=0, hosts=1 (2)")


def test_a_laggard_split_off_live_keeps_the_clush_view():
    state = state_of(2)
    renderer = TextRenderer(state, fold=True)
    renderer.add(state.apply(Output(0, OUT, "a\n")))
    renderer.flush(1.0)
    renderer.flush(3.0)  # hosts=1 lags past HOLD: it goes on as a group of its own
    renderer.add(state.apply(Output(1, OUT, "a\n")))
    for index in (0, 1):
        state.apply(Exited(index, 0, 1.0))
    state.apply(Finished())
    renderer.finish()
    assert group_end_text(state, renderer).startswith("---------------- hosts=0, hosts=1 (2) ----")
