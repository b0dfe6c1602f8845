"""Pure tests of the diagnosis aids: quiet ranks, grep over the run log, the diff to the
majority, live folding, per-rank resources (no kernel, no Monarch; a fake clock)."""

from __future__ import annotations

from monarch_jupyter.remote.view.args import parse_line
from monarch_jupyter.remote.view.model import (
    OUT,
    Exited,
    Finished,
    Output,
    RankState,
    RunState,
    Started,
    Stopping,
)
from monarch_jupyter.remote.view.quiet import QuietWatch, ranks_label
from monarch_jupyter.remote.view.render import TextRenderer
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


# ── grep ──
def _log(tmp_path, labels=("hosts=0", "hosts=1")):
    from monarch_jupyter.remote.run.spool import Spool

    spool = Spool(tmp_path / "run.log", list(labels))
    spool.note("%%remote bash on mesh hosts (2 ranks): 'train'")
    return spool


def _refs(n=2):
    from monarch_jupyter.remote.run.index import RankRef

    return [RankRef(f"hosts={i}", "hosts", {"hosts": i}, i) for i in range(n)]


def test_search_numbers_lines_gives_context_once_and_counts_past_the_limit():
    from monarch_jupyter.remote.host.search import compile_pattern, search

    data = b"".join(b"line %d%s\n" % (i, b" nan" if i in (3, 4, 9) else b"") for i in range(1, 11))
    hits, count = search(data, compile_pattern("NAN", ignore_case=True), context=1)
    assert count == 3
    assert hits == [
        (2, False, "line 2"),
        (3, True, "line 3 nan"),
        (4, True, "line 4 nan"),
        (5, False, "line 5"),
        (8, False, "line 8"),
        (9, True, "line 9 nan"),
        (10, False, "line 10"),
    ]
    assert search(data, compile_pattern("nan", False), limit=1)[0] == [(3, True, "line 3 nan")]
    assert search(b"no newline at end", compile_pattern("end$", False)) == (
        [(1, True, "no newline at end")],
        1,
    )
    assert search(b"", compile_pattern("x", False)) == ([], 0)


def test_grep_log_labels_hits_by_rank_and_stream_line_numbers_per_stream(tmp_path):
    from monarch_jupyter.remote.host.search import compile_pattern
    from monarch_jupyter.remote.run import grep

    spool = _log(tmp_path)
    spool.write(0, "out", "a\nerror one\n")
    spool.write(1, "out", "a\n")
    spool.write(1, "err", "error two\n")
    spool.write(1, "out", "b\nerror three\n")
    spool.write(0, "out", "==> [hosts=1:err] <== forged? no: not at a header's end\n")
    spool.close()
    found, partial = grep.grep_log(
        tmp_path / "run.log", compile_pattern("error|forged", False), 0, _refs(), ("out", "err")
    )
    assert partial == set()
    got = {(f.rank.label, f.stream): f.hits for f in found if f.count}
    assert got == {
        ("hosts=0", "out"): (
            (2, True, "error one"),
            (3, True, "==> [hosts=1:err] <== forged? no: not at a header's end"),
        ),
        ("hosts=1", "err"): ((1, True, "error two"),),
        ("hosts=1", "out"): ((3, True, "error three"),),
    }
    text = grep.render("r1", "train", "error", found, "log x.log")
    assert text.splitlines()[0] == "run r1 ('train'): /error/ in 3 of 4 rank streams, 4 lines (log x.log)"
    assert "hosts=1, stderr:\n    1: error two\n" in text


def test_grep_folds_ranks_with_the_same_hits_and_notes_a_skipped_stream(tmp_path):
    from monarch_jupyter.remote.host.search import compile_pattern
    from monarch_jupyter.remote.run import grep
    from monarch_jupyter.remote.run.spool import Spool

    labels = [f"hosts={i}" for i in range(4)]
    spool = Spool(tmp_path / "run.log", labels, head=64, tail=32)
    for i in range(3):
        spool.write(i, "out", "start\nloss 1.0\n")
    spool.write(3, "out", "start\nloss nan\n")
    for _ in range(10):
        spool.write(3, "out", "x" * 20 + "\n")
    spool.write(3, "out", "loss 9\n")
    spool.close()
    found, partial = grep.grep_log(
        tmp_path / "run.log", compile_pattern("loss", False), 0, _refs(4), ("out",)
    )
    assert partial == {(3, "out")}
    text = grep.render("r1", "train", "loss", found, "log")
    assert "hosts=[0-2] (3):\n    2: loss 1.0\n" in text, text
    assert "hosts=3:\n    (line numbers count from the part kept" in text, text


def test_frames_is_the_one_reader_of_the_framing():
    from monarch_jupyter.remote.run.spool import frames

    data = b"==> [#] <==\nnote\n==> [hosts=0] <==\na\nb\n==> [hosts=0:err] <==\nc"
    assert [(s, data[a:b]) for s, a, b in frames(data)] == [
        ("#", b"note\n"),
        ("hosts=0", b"a\nb\n"),
        ("hosts=0:err", b"c"),
    ]


# ── --diff ──
def test_diff_shows_each_outlier_against_the_majority():
    from monarch_jupyter.remote.view.diff import diff_text

    state = state_of(5)
    for i in range(5):
        text = "step 1\nloss 0.5\nstep 2\n" if i != 3 else "step 1\nloss nan\nstep 2\n"
        state.apply(Output(i, OUT, text))
    state.apply(Output(4, "err", "warn\n"))
    state.apply(Finished())
    text = diff_text(state)
    lines = text.splitlines()
    assert lines[0] == "--diff: hosts=[0-2] (3) agree; 2 outliers", text
    assert lines[1:4] == ["--- hosts=[0-2] (3)", "+++ hosts=3", "@@ -1,3 +1,3 @@"], text
    assert " step 1" in lines and "-loss 0.5" in lines and "+loss nan" in lines
    assert "+++ hosts=4" in lines and "+[err] warn" in lines


def test_diff_says_when_all_agree_and_when_there_is_no_majority():
    from monarch_jupyter.remote.view.diff import diff_text

    state = state_of(2)
    for i in range(2):
        state.apply(Output(i, OUT, "same\n"))
    assert diff_text(state) == "--diff: all 2 ranks printed the same\n"
    state.apply(Output(1, OUT, "more\n"))
    assert "no majority" in diff_text(state).splitlines()[0]
    assert diff_text(state_of(1)) == ""
    assert parse_line("--diff hostname").diff


# ── live folding ──
def _feed(fold, state, index, text, now):
    fold.add(state.apply(Output(index, OUT, text)), now)


def test_identical_ranks_print_once_under_one_label_and_a_diverging_rank_unfolds():
    from monarch_jupyter.remote.view.livefold import LiveFold

    state = state_of(4)
    fold = LiveFold(state.ranks)
    for i in range(4):
        _feed(fold, state, i, "step 1\n", 0.0)
    assert fold.take(100) == ["[hosts=[0-3] (4)] step 1"]
    for i in (0, 1, 2):
        _feed(fold, state, i, "step 2\n", 0.1)
    assert fold.take(100) == []  # hosts=3 has not printed it yet
    _feed(fold, state, 3, "loss nan\n", 0.2)
    assert fold.take(100) == ["[hosts=[0-2] (3)] step 2", "[hosts=3] loss nan"]
    _feed(fold, state, 3, "Traceback\n", 0.3)
    assert fold.take(100) == ["[hosts=3] Traceback"]


def test_a_lagging_rank_stops_holding_the_others_back_after_hold():
    from monarch_jupyter.remote.view.livefold import HOLD, LiveFold

    state = state_of(3)
    fold = LiveFold(state.ranks)
    for i in (0, 1):
        _feed(fold, state, i, "a\nb\n", 0.0)
    fold.tick(HOLD / 2)
    assert fold.take(100) == []
    fold.tick(HOLD + 0.1)
    assert fold.take(100) == ["[hosts=[0-1] (2)] a", "[hosts=[0-1] (2)] b"]
    _feed(fold, state, 2, "a\nb\n", HOLD + 0.2)  # the laggard prints the same: its own label
    assert fold.take(100) == ["[hosts=2] a", "[hosts=2] b"]
    _feed(fold, state, 0, "c\n", 2.0)
    assert fold.flush() == ["[hosts=0] c"]  # the end: only hosts=0 printed it


def test_group_renders_live_in_the_text_view():
    state = state_of(3)
    renderer = TextRenderer(state, fold=True)
    for i in range(3):
        renderer.add(state.apply(Output(i, OUT, "same\n")))
    assert renderer.flush(1.0) == "[hosts=[0-2] (3)] same\n"
    renderer.add(state.apply(Output(0, "err", "oops\n")))
    renderer.add(state.apply(Output(1, OUT, "x\n")))
    assert renderer.flush(1.5) == ""  # hosts=2 decides
    renderer.add(state.apply(Output(2, OUT, "x\n")))
    assert renderer.flush(3.0) == "[hosts=[1-2] (2)] x\n[hosts=0:err] oops\n"
    renderer.add(state.apply(Output(2, OUT, "y\n")))
    state.apply(Finished())
    assert renderer.finish() == "[hosts=2] y\n"


def test_group_folds_ranks_whose_lines_came_before_the_first_flush_on_a_real_clock():
    """The quickstart's case: one rank's lines arrive before the renderer knows the time (the
    monotonic clock is far from 0); the other's a moment later: still one group, not split."""
    state = state_of(2)
    renderer = TextRenderer(state, fold=True)
    renderer.add(state.apply(Output(1, OUT, "Linux\n")))
    assert renderer.flush(5000.0) == ""  # hosts=0 has not printed yet: not a laggard so soon
    renderer.add(state.apply(Output(0, OUT, "Linux\n")))
    assert renderer.flush(5000.2) == "[hosts=[0-1] (2)] Linux\n"
    renderer.add(state.apply(Output(0, OUT, "python: yes\n")))
    assert renderer.flush(5000.4) == ""
    renderer.add(state.apply(Output(1, OUT, "python: yes\n")))
    state.apply(Finished())
    assert renderer.finish() == "[hosts=[0-1] (2)] python: yes\n"


# ── resources per rank ──
NVIDIA_SMI = """12345, 1024 MiB
12345, 512 MiB
777, [N/A]
garbage line
888, 40 MiB
"""


def test_nvidia_smi_compute_apps_are_parsed_per_pid():
    from monarch_jupyter.remote.host.usage import parse_compute_apps

    assert parse_compute_apps(NVIDIA_SMI) == {12345: 1536, 888: 40}
    assert parse_compute_apps("") == {}
    assert parse_compute_apps("1, 20") == {1: 20}  # nounits


def test_a_rank_idle_while_the_others_work_is_flagged_first():
    from monarch_jupyter.remote.view import resources

    samples = [
        {"key": "hosts", "rank": 0, "cpu": 99.0, "rss": 1_200_000_000, "gpu_mib": None},
        {"key": "hosts", "rank": 1, "cpu": 0.0, "rss": 310_000_000, "gpu_mib": 2048},
        {"key": "hosts", "rank": 2, "cpu": 97.5, "rss": 5_000, "gpu_mib": None},
    ]
    assert resources.idle(samples) == {1}
    labels = {("hosts", i): f"hosts={i}" for i in range(3)}
    assert resources.usage_line(samples, labels) == (
        "ranks: hosts=1 cpu 0% rss 310 MB gpu 2048 MiB (idle while others work)"
        " · hosts=0 cpu 99% rss 1.2 GB · hosts=2 cpu 98% rss 5 KB"
    )
    assert resources.idle([{"cpu": 0.0}, {"cpu": 0.5}]) == set()  # all idle alike
    merged = resources.merge([{"r": [samples[1]]}, {"r": [samples[0], samples[1]]}])
    assert [s["rank"] for s in merged["r"]] == [0, 1]
