"""Pure tests of issue 19's diagnosis aids: quiet ranks, grep over the run log, the diff to the
majority, live folding, per-rank resources (no kernel, no Monarch; a fake clock)."""

from __future__ import annotations

from monarch_jupyter.remote.args import parse_line
from monarch_jupyter.remote.model import OUT, Exited, Finished, Output, RankState, RunState, Started, Stopping
from monarch_jupyter.remote.quiet import QuietWatch, ranks_label
from monarch_jupyter.remote.render import TextRenderer
from monarch_jupyter.widgets.run_model import tile_json


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def state_of(n: int, clock: Clock | None = None) -> RunState:
    ranks = [RankState(label=f"hosts={i}", mesh="hosts", point={"hosts": i}, rank=i) for i in range(n)]
    return RunState(
        command="train", mode="bash", target=f"mesh hosts ({n} ranks)", ranks=ranks, started=0.0,
        clock=clock or Clock(),
    )  # fmt: skip


def started(n: int, clock: Clock) -> RunState:
    state = state_of(n, clock)
    for i in range(n):
        state.apply(Started(i, 100 + i))
    return state


def print_all(state: RunState, but: tuple[int, ...] = ()) -> None:
    for i in range(len(state.ranks)):
        if i not in but:
            state.apply(Output(i, OUT, "step\n"))


# ── quiet ranks ──
def test_a_rank_silent_far_longer_than_the_others_is_flagged_once_with_the_others_counted():
    clock = Clock()
    state = started(8, clock)
    watch = QuietWatch(state)
    notes = []
    for _ in range(30):  # 15 s: every rank but 7 prints every half second
        clock.now += 0.5
        print_all(state, but=(7,))
        notes.append(watch.check(clock.now))
    flagged = [n for n in notes if n]
    assert flagged == ["hosts=7 quiet for 10 s; 7 others printing"], notes
    assert state.ranks[7].quiet_since == 1000.0 and state.ranks[0].quiet_since is None
    assert tile_json(7, state.ranks[7])["quiet_since"] == 1000.0
    state.apply(Output(7, OUT, "back\n"))  # it prints again: no longer quiet
    clock.now += 0.5
    assert watch.check(clock.now) == "" and state.ranks[7].quiet_since is None


def test_no_rank_is_quiet_when_all_are_silent_alike_unless_quiet_after_says_so():
    clock = Clock()
    state = started(4, clock)
    watch, strict = QuietWatch(state), QuietWatch(state, quiet_after=3.0)
    for _ in range(40):
        clock.now += 0.5
        assert watch.check(clock.now) == ""
    clock = Clock()
    state = started(4, clock)
    strict = QuietWatch(state, quiet_after=3.0)
    notes = []
    for _ in range(8):
        clock.now += 0.5
        notes.append(strict.check(clock.now))
    assert [n for n in notes if n] == ["hosts=[0-3] quiet for 3 s; 0 others printing"], notes


def test_quiet_after_flags_one_rank_sooner_and_checks_at_most_twice_a_second():
    clock = Clock()
    state = started(3, clock)
    watch = QuietWatch(state, quiet_after=2.0)
    assert watch.check(clock.now) == ""
    clock.now += 0.2
    print_all(state, but=(1,))
    assert watch.check(clock.now) == ""  # too soon after the last look: not even looked
    for _ in range(4):
        clock.now += 0.5
        print_all(state, but=(1,))
        note = watch.check(clock.now)
    assert note == "hosts=1 quiet for 2 s; 2 others printing"


def test_a_finished_rank_is_never_quiet():
    clock = Clock()
    state = started(2, clock)
    watch = QuietWatch(state, quiet_after=1.0)
    state.apply(Exited(1, 0, 0.1))
    for _ in range(5):
        clock.now += 0.5
        print_all(state, but=(1,))
        assert watch.check(clock.now) == ""


def test_the_text_view_writes_the_quiet_line_and_the_summary_names_ranks_never_finished():
    clock = Clock()
    state = started(3, clock)
    renderer = TextRenderer(state, quiet=QuietWatch(state, quiet_after=2.0))
    text = ""
    for step in range(6):
        clock.now += 0.5
        print_all(state, but=(2,))
        text += renderer.flush(float(step))
    assert "hosts=2 quiet for 2 s; 2 others printing\n" in text, text
    state.apply(Exited(0, 0, 3.0))
    state.apply(Stopping("timed_out"))
    state.apply(Finished())
    line = state.summary_line()
    assert "never finished: hosts=1, hosts=2 (quiet 3 s)" in line, line


def test_quiet_after_is_a_flag_of_the_run():
    args = parse_line("--quiet-after 30 sleep 1")
    assert args.quiet_after == 30.0 and args.command == "sleep 1"


def test_ranks_label_folds_and_names_meshes():
    ranks = [RankState(label="", mesh="a", point={"hosts": i}, rank=i) for i in (0, 1, 2, 5)]
    assert ranks_label(ranks) == "hosts=[0-2,5]"
    ranks.append(RankState(label="", mesh="b", point={"hosts": 0}, rank=0))
    assert ranks_label(ranks) == "a/hosts=[0-2,5]; b/hosts=0"
