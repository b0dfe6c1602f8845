"""Pure tests of %%remote's flag parsing, run model and rendering (no kernel, no Monarch)."""

from __future__ import annotations

import argparse
import json
import re
import time

import pytest

from monarch_jupyter.errors import MonarchJupyterError
from monarch_jupyter.remote.view.args import (
    PARSERS,
    VERBS,
    RemoteArgs,
    RemoteVerb,
    help_text,
    parse_cell,
    parse_line,
)
from monarch_jupyter.remote.view.lines import TAIL_LINES, visible
from monarch_jupyter.remote.view.model import (
    ERR,
    MIME_TYPE,
    OUT,
    Exited,
    Finished,
    Lost,
    Output,
    RankState,
    RunState,
    Started,
    Stopping,
)
from monarch_jupyter.remote.view.render import TextRenderer, group_text
from monarch_jupyter.remote.view.results import RemoteResults
from monarch_jupyter.text.parser import ArgumentsError, HelpRequested, MagicParser


# ── args ──
def test_flags_before_and_after_mode():
    a = parse_cell("--quiet bash --rank 0,2,0 -e A=1 --env=B=x=y --timeout 2.5", "echo hi\n")
    assert (a.mode, a.quiet, a.ranks, a.env, a.timeout, a.command) == (
        "bash",
        True,
        (0, 2),
        (("A", "1"), ("B", "x=y")),
        2.5,
        "echo hi\n",
    )
    b = parse_cell("python --point hosts=1,gpu=0 --per-host gpu=2 --save res --group", "print(1)")
    assert b.mode == "python" and b.point == (("hosts", 1), ("gpu", 0)) and b.per_host == (("gpu", 2),)
    assert b.save == "res" and b.group and b.live  # --group folds live
    c = parse_cell("--mesh trainers --workdir '/tmp/a b' --output-dir=o/$SUBDIR --no-raise", "x")
    assert (c.mesh, c.workdir, c.output_dir, c.no_raise, c.all_meshes) == (
        "trainers",
        "/tmp/a b",
        "o/$SUBDIR",
        True,
        False,
    )
    assert parse_cell("--all", "x").all_meshes
    assert parse_cell("", "x") == RemoteArgs(command="x")


def test_line_keeps_the_command_verbatim():
    a = parse_line("--rank 1 --workdir /tmp echo $HOME 'a  b' | wc -c  # c")
    assert a.ranks == (1,) and a.workdir == "/tmp"
    assert a.command == "echo $HOME 'a  b' | wc -c  # c"
    assert parse_line("-- --not-a-flag").command == "--not-a-flag"
    assert parse_line("--quiet  --  -x 'y'").command == "-x 'y'"
    # flags after the command's first word belong to the command, ours included
    assert parse_line("ls -la").command == "ls -la"
    assert parse_line("echo --rank 1 -h --").command == "echo --rank 1 -h --"
    assert parse_line("-- grep -e x") == RemoteArgs(command="grep -e x")  # grep is a verb
    b = parse_line('-eA=1  --env "B=two words"   python3 -c "print(1)"')
    assert b.env == (("A", "1"), ("B", "two words")) and b.command == 'python3 -c "print(1)"'
    with pytest.raises(ArgumentsError, match="unknown flag '--bogus'"):
        parse_line("--bogus true")


@pytest.mark.parametrize(
    "line, message",
    [
        ("--bogus", "unknown flag '--bogus'"),
        ("--ran 1", "unknown flag '--ran'"),  # no abbreviations
        ("--bogus 1 python", "unknown flag '--bogus'"),  # the flag, not its value, is the problem
        ("--rank", "argument --rank: expected one argument"),
        ("--rank a", "argument --rank: wants N[,M…] (flat ranks), got 'a'"),
        ("--rank 1,-1", "argument --rank: -1 is negative; ranks count from 0"),
        ("--point hosts", "argument --point: wants DIM=N[,DIM=N…], got 'hosts'"),
        ("--point h=x", "argument --point: 'x' is not an integer (in 'h=x')"),
        ("--point h=1,h=2", "argument --point: h given twice (in 'h=1,h=2')"),
        ("--point hosts=1 --rank 0", "argument --rank: not allowed with argument --point"),
        ("--all --mesh a", "argument --mesh: not allowed with argument --all"),
        ("--per-host gpu=0", "argument --per-host: gpu=0 must be ≥ 1"),
        ("-e 1A=b", "argument -e/--env: wants KEY=VALUE with KEY a variable name, got '1A=b'"),
        ("--workdir ''", "argument --workdir: needs a directory, got ''"),
        ("--timeout 0", "argument --timeout: must be > 0 seconds, got '0'"),
        ("--timeout soon", "argument --timeout: wants seconds, got 'soon'"),
        ("--timeout inf", "argument --timeout: wants a finite number of seconds, got 'inf'"),
        ("--timeout 1e309", "argument --timeout: wants a finite number of seconds, got '1e309'"),
        ("--timeout nan", "argument --timeout: wants a finite number of seconds, got 'nan'"),
        ("--timeout -5", "argument --timeout: must be > 0 seconds, got '-5'"),
        ("--point hosts=\uff11", "argument --point: '\uff11' is not an integer (in 'hosts=\uff11')"),
        ("--save 1x", "argument --save: wants a Python variable name, got '1x'"),
        ("--save class", "argument --save: wants a Python variable name, got 'class' (a keyword)"),
        (
            "--save get_ipython",
            "argument --save: get_ipython belongs to IPython (its history and helpers); choose another name",
        ),
        (
            "--save In",
            "argument --save: In belongs to IPython (its history and helpers); choose another name",
        ),
        (
            "--save Out",
            "argument --save: Out belongs to IPython (its history and helpers); choose another name",
        ),
        (
            "--save exit",
            "argument --save: exit belongs to IPython (its history and helpers); choose another name",
        ),
        (
            "--save quit",
            "argument --save: quit belongs to IPython (its history and helpers); choose another name",
        ),
        ("--save _", "argument --save: _ belongs to IPython (its history and helpers); choose another name"),
        (
            "--save __",
            "argument --save: __ belongs to IPython (its history and helpers); choose another name",
        ),
        (
            "--save ___",
            "argument --save: ___ belongs to IPython (its history and helpers); choose another name",
        ),
        (
            "--save _i",
            "argument --save: _i belongs to IPython (its history and helpers); choose another name",
        ),
        (
            "--save _ii",
            "argument --save: _ii belongs to IPython (its history and helpers); choose another name",
        ),
        (
            "--save _iii",
            "argument --save: _iii belongs to IPython (its history and helpers); choose another name",
        ),
        (
            "--save _oh",
            "argument --save: _oh belongs to IPython (its history and helpers); choose another name",
        ),
        (
            "--save _dh",
            "argument --save: _dh belongs to IPython (its history and helpers); choose another name",
        ),
        (
            "--save _ih",
            "argument --save: _ih belongs to IPython (its history and helpers); choose another name",
        ),
        (
            "--save _12",
            "argument --save: _12 belongs to IPython (its history and helpers); choose another name",
        ),
        (
            "--save _i3",
            "argument --save: _i3 belongs to IPython (its history and helpers); choose another name",
        ),
        ("bash python", "unexpected 'python'; the mode is bash or python, given once"),
        ("perl", "unexpected 'perl'; the mode is bash or python, given once"),
        ("--mesh a --mesh b", "argument --mesh: given twice; give it once"),
        ("--quiet=1", "argument --quiet: ignored explicit argument '1'"),
    ],
)
def test_bad_flags_are_one_line_errors(line, message):
    with pytest.raises(ArgumentsError) as info:
        parse_cell(line, "x")
    assert str(info.value) == f"%%remote: {message} (see %%remote?)"
    assert isinstance(info.value, MonarchJupyterError)


@pytest.mark.parametrize(
    "line, message",
    [
        (
            "--rank 0",
            "%remote: no command; put one after the flags: %remote [flags] CMD… (or use %%remote for a cell)",
        ),
        (
            "--quiet --",
            "%remote: no command; put one after the flags: %remote [flags] CMD… (or use %%remote for a cell)",
        ),
        ("--rank 0 --bogus x", "%remote: unknown flag '--bogus' (see %%remote?)"),
        (
            "--timeout -1 sleep 9",
            "%remote: argument --timeout: must be > 0 seconds, got '-1' (see %%remote?)",
        ),
        ("--workdir -x pwd", "%remote: argument --workdir: expected one argument (see %%remote?)"),
        ("echo 'it", '%remote: No closing quotation in "echo \'it"'),
    ],
)
def test_bad_lines_are_one_line_errors(line, message):
    with pytest.raises(ArgumentsError) as info:
        parse_line(line)
    assert str(info.value) == message


def test_bad_cells_are_one_line_errors():
    with pytest.raises(ArgumentsError) as info:
        parse_cell("--quiet", "  \n")
    assert str(info.value) == "%%remote: the cell is empty; put the bash or Python code to run below %%remote"
    with pytest.raises(ArgumentsError) as info:
        parse_cell("--workdir 'x", "true")
    assert str(info.value) == '%%remote: No closing quotation in "--workdir \'x"'


def _option_strings(parser):
    return [
        flag for action in parser._actions for flag in action.option_strings if flag not in ("-h", "--help")
    ]


def test_help_is_generated_from_the_definitions_that_parse():
    text = help_text()
    flags = _option_strings(PARSERS["%%remote"])
    assert flags == _option_strings(PARSERS["%remote"])  # both forms take the same flags
    assert len(flags) == 20  # 18 flags and the hidden --cell-line, -e and --env being one
    for flag in (f for f in flags if f != "--cell-line"):
        assert re.search(rf"^  (-e, )?{flag}\b", text, re.M), f"{flag} is not in %%remote? help"
    for action in PARSERS["%%remote"]._actions:
        if action.option_strings and action.help is not argparse.SUPPRESS:
            assert " ".join(action.help.split()[:4]) in " ".join(text.split()), action.option_strings
    assert "%%remote [bash|python] [flags]" in text and "%remote [flags] CMD…" in text
    assert max(map(len, text.splitlines())) <= 88
    for line in ("-h", "--quiet --help"):
        with pytest.raises(HelpRequested) as info:
            parse_line(line)
        assert info.value.text == text
    with pytest.raises(HelpRequested) as info:
        parse_cell("python -h", "")
    assert info.value.text == text


def test_a_verb_is_dispatched_before_the_command(monkeypatch):
    stop = MagicParser("%remote stop", hint="see %%remote?", description="stop a detached run")
    stop.add_argument("run", metavar="RUN")
    monkeypatch.setitem(VERBS, "stop", stop)
    assert parse_line("stop 20261130-1") == RemoteVerb("stop", {"run": "20261130-1"})
    assert parse_line("-- stop 1").command == "stop 1"  # `--` runs a command named like a verb
    assert parse_line("--rank 0 stop").command == "stop"
    with pytest.raises(
        ArgumentsError, match=r"^%remote stop: the following arguments are required: RUN \(see"
    ):
        parse_line("stop")
    assert "\n  %remote stop RUN               stop a detached run\n" in help_text() + "\n"


# ── model ──
def _state(n=2, labels=None):
    labels = labels or [f"hosts={i}" for i in range(n)]
    ranks = [
        RankState(label=label, mesh="hosts", point={"hosts": i}, rank=i) for i, label in enumerate(labels)
    ]
    return RunState(
        command="echo hi",
        mode="bash",
        target=f"mesh hosts ({n} ranks)",
        ranks=ranks,
        started=0.0,
        log_path=".monarch/default/runs/x.log",
    )


def test_partial_lines_and_carriage_returns():
    s = _state(1)
    assert s.apply(Output(0, OUT, "hel")) == []
    assert s.ranks[0].pending[OUT] == "hel"
    fed = s.apply(Output(0, OUT, "lo\nbar 10%\rbar 50%\rbar 100%\n"))
    assert fed[0].last(10) == ["hello", "bar 100%"] and fed[0].last(1) == ["bar 100%"]
    assert (fed[0].stream, fed[0].count) == (OUT, 2)
    s.apply(Output(0, ERR, "no newline"))
    fed = s.apply(Exited(0, 0, 0.5))
    assert (fed[0].stream, fed[0].last(5)) == (ERR, ["no newline"])
    assert list(s.ranks[0].lines)[-1] == (ERR, "no newline")
    assert s.ranks[0].status == "ok" and s.ranks[0].counts == {OUT: 2, ERR: 1}
    assert visible("a\rb\r") == "b" and visible("x\r\n".rstrip("\n")) == "x"


def test_tail_is_bounded_and_counts_everything():
    s = _state(1)
    s.apply(Output(0, OUT, "".join(f"{i}\n" for i in range(100000))))
    r = s.ranks[0]
    assert r.counts[OUT] == 100000 and len(r.lines) == TAIL_LINES
    assert list(r.lines)[-1] == (OUT, "99999")
    s.apply(Exited(0, 0, 1.0))
    s.apply(Finished())
    mime = s.to_mime()
    assert mime["ranks"][0]["truncated"] == 100000 - TAIL_LINES
    json.dumps(mime)


def test_statuses_summary_and_failure_message():
    s = _state(4)
    s.apply(Started(0, 11))
    s.apply(Exited(0, 0, 0.1))
    s.apply(Exited(1, 3, 0.1))
    s.apply(Lost(2, "worker process 99 died"))
    s.apply(Stopping("timed_out"))
    s.apply(Exited(3, -2, 1.0))
    s.apply(Finished())
    assert [r.status for r in s.ranks] == ["ok", "failed", "failed", "timed_out"]
    assert s.counts() == {"ok": 1, "failed": 2, "timed_out": 1, "skipped": 0, "interrupted": 0}
    line = s.summary_line()
    assert "1 ok" in line and "hosts=1 (rc 3)" in line and "worker process 99 died" in line
    assert "1 timed out: hosts=3" in line and "log .monarch/default/runs/x.log" in line
    msg = s.failure_message()
    assert "3 of 4" in msg and "hosts=1" in msg and "hosts=0" not in msg
    mime = s.to_mime()
    assert mime["version"] == 2 and mime["state"] == "finished" and mime["summary"]["timed_out"] == 1
    assert set(mime["ranks"][0]) >= {
        "label",
        "mesh",
        "point",
        "rank",
        "status",
        "returncode",
        "duration",
        "lines",
        "truncated",
    }
    bundle = s.mime_bundle()
    assert set(bundle) == {"application/vnd.monarch.remote+json", "text/plain", "text/html"}


def test_interrupt_marks_running_ranks():
    s = _state(2)
    s.apply(Output(0, OUT, "x\n"))
    s.apply(Exited(1, 0, 0.1))
    s.apply(Stopping("interrupted"))
    s.apply(Finished())
    assert [r.status for r in s.ranks] == ["interrupted", "ok"]


def test_saved_results():
    s = _state(2)
    for r in s.ranks:
        r.full = {OUT: [], ERR: []}
    s.apply(Output(0, OUT, "a\nb"))
    s.apply(Output(0, ERR, "e\n"))
    s.apply(Exited(0, 0, 0.2))
    s.apply(Exited(1, 1, 0.3))
    s.apply(Finished())
    res = RemoteResults.from_state(s)
    assert res[0].stdout == "a\nb" and res[0].stderr == "e\n" and res["hosts=1"].returncode == 1
    assert res.returncodes == {"hosts=0": 0, "hosts=1": 1} and not res.ok


class _Observer:
    def __init__(self):
        self.seen = []

    def on_event(self, state, event):
        self.seen.append(type(event).__name__)


def test_observers_see_every_event():
    s = _state(1)
    obs = _Observer()
    s.observers.append(obs)
    s.apply(Output(0, OUT, "x\n"))
    s.apply(Exited(0, 0, 0.1))
    s.apply(Finished())
    assert obs.seen == ["Output", "Exited", "Finished"]


# ── render ──
def test_renderer_coalesces_to_20_writes_a_second():
    s = _state(8)
    r = TextRenderer(s)
    writes = []
    t = 0.0
    for step in range(2000):  # 2 s of 1 ms ticks, every rank printing every tick
        t = step / 1000
        for i in range(8):
            r.add(s.apply(Output(i, OUT, f"line {step}\n")))
        text = r.flush(t)
        if text:
            writes.append((t, text))
    writes.append((t, r.finish()))  # the run's last write, never held back
    assert 15 <= len(writes) <= 2 * 20  # then every rank hit its live budget
    for start, _ in writes:  # never more than 20 writes in any second (3 back to back at most)
        assert sum(1 for t, _ in writes if start <= t < start + 1.0) <= 20
    assert sum(1 for t, _ in writes if t < 0.05) <= 3
    total = "".join(text for _, text in writes)
    assert total.count("\n") < 8 * 1000 + 200  # bounded per rank
    assert "[hosts=3] line 0\n" in total and "more output not shown live" in total


def test_renderer_labels_stderr_and_shows_partials():
    s = _state(1)
    r = TextRenderer(s)
    r.add(s.apply(Output(0, OUT, "hello\n")))
    r.add(s.apply(Output(0, ERR, "oops\n")))
    r.add(s.apply(Output(0, OUT, "50%|####")))
    text = r.flush(0.0)
    assert text == "[hosts=0] hello\n[hosts=0:err] oops\n"  # an unfinished line waits 0.2 s
    assert r.flush(0.1) == ""
    assert r.flush(0.25) == "[hosts=0] 50%|####\n"
    r.add(s.apply(Output(0, OUT, "\r60%|#####")))
    assert r.flush(0.5) == ""  # a partial line is re-shown at most once a second
    assert r.flush(1.3) == "[hosts=0] 60%|#####\n"
    r.add(s.apply(Output(0, OUT, "\r100%\n")))
    assert r.flush(1.4) == "[hosts=0] 100%\n"
    r.add(s.apply(Output(0, OUT, "almost")))
    assert r.flush(1.45) == ""
    assert r.flush(1.7) == "[hosts=0] almost\n"
    r.add(s.apply(Output(0, OUT, "\nnext\n")))
    assert r.flush(1.8) == "[hosts=0] next\n"  # the finished line was already shown
    r.add(s.apply(Output(0, OUT, "split li")))
    assert r.flush(1.85) == ""
    r.add(s.apply(Output(0, OUT, "ne\n")))
    assert r.flush(1.9) == "[hosts=0] split line\n"  # chunk boundaries never show fragments


def test_renderer_shows_the_latest_lines_of_a_burst():
    s = _state(2)
    r = TextRenderer(s, write_lines=100)
    r.add(s.apply(Output(0, OUT, "".join(f"{i}\n" for i in range(5000)))))
    text = r.flush(0.0)
    assert text.startswith("[hosts=0] … 4900 lines not shown (they are in the log)\n[hosts=0] 4900\n")
    assert text.endswith("[hosts=0] 4999\n") and text.count("\n") == 101


def test_renderer_caps_live_lines_and_shows_the_tail():
    s = _state(1)
    r = TextRenderer(s, live_lines=50)
    t = 0.0
    out = []
    for chunk in range(20):
        r.add(s.apply(Output(0, OUT, "".join(f"{chunk}-{i}\n" for i in range(10)))))
        t += 0.1
        out.append(r.flush(t))
    s.apply(Exited(0, 0, 1.0))
    out.append(r.finish())
    text = "".join(out)
    assert "more output not shown live" in text
    assert text.rstrip().endswith("[hosts=0] 19-9")
    assert text.count("\n") < 80


def test_quiet_renderer_writes_nothing():
    s = _state(1)
    r = TextRenderer(s, live=False)
    r.add(s.apply(Output(0, OUT, "x\n")))
    assert r.flush(10.0) == "" and r.finish() == ""


def test_group_text_like_clush():
    s = _state(3)
    s.apply(Output(0, OUT, "same\n"))
    s.apply(Output(1, OUT, "same\n"))
    s.apply(Output(2, OUT, "other\n"))
    s.apply(Output(2, ERR, "bad\n"))
    s.apply(Exited(0, 0, 0.1))
    s.apply(Exited(1, 0, 0.1))
    s.apply(Exited(2, 2, 0.1))
    s.apply(Finished())
    assert group_text(s) == (
        "---------------- hosts=0, hosts=1 (2) ----------------\nsame\n"
        "---------------- hosts=2 (1) · failed, rc 2 ----------------\nother\n[err] bad\n"
    )


# ── spool ──
def test_spool_frames_ranks_and_keeps_lines_whole(tmp_path):
    from monarch_jupyter.remote.run.spool import Spool, read_log

    path = tmp_path / "run.log"
    spool = Spool(path, ["hosts=0", "hosts=1"])
    spool.note("%%remote bash on mesh hosts (2 ranks): 'x'")
    spool.write(0, OUT, "a\npart")
    spool.write(1, ERR, "warn\n")
    spool.write(0, OUT, "ial\n# not a note\n")
    spool.write(1, OUT, "tail without newline")
    spool.note("hosts=1: worker process 9 died")
    spool.close()
    log = read_log(path)
    assert log == {
        "#": ["%%remote bash on mesh hosts (2 ranks): 'x'", "hosts=1: worker process 9 died"],
        "hosts=0": ["a", "partial", "# not a note"],
        "hosts=1:err": ["warn"],
        "hosts=1": ["tail without newline"],
    }
    assert path.read_text().startswith("==> [#] <==\n%%remote bash")


def test_spool_keeps_the_head_and_the_tail_of_each_rank_and_says_what_it_skipped(tmp_path):
    from monarch_jupyter.remote.run.spool import Spool, read_log

    path = tmp_path / "run.log"
    spool = Spool(path, ["hosts=0", "hosts=1"], head=100, tail=60)
    for i in range(1000):  # "line 000\n": 9 bytes each
        spool.write(0, OUT, f"line {i:03}\n")
        if i < 3:
            spool.write(1, OUT, f"small {i}\n")
    spool.close()
    log = read_log(path)
    kept = log["hosts=0"]
    assert kept[:11] == [f"line {i:03}" for i in range(11)]  # the head: whole lines up to 100 bytes
    assert kept[11:] == [f"line {i:03}" for i in range(994, 1000)]  # the tail: whole lines, <= 60 bytes
    assert log["hosts=1"] == ["small 0", "small 1", "small 2"]  # a rank within the bound is whole
    skipped = 9000 - 9 * len(kept)
    assert log["#"] == [
        f"hosts=0: {skipped} bytes of stdout skipped here (the log keeps the first 100 and the last 60 "
        "bytes per rank and stream)"
    ]
    assert path.stat().st_size < 600  # 9,000+ unbounded


def test_help_documents_every_flag():
    from IPython.core.oinspect import getdoc

    from monarch_jupyter.remote.cell.magic import RemoteMagics

    doc = getdoc(RemoteMagics.remote)  # what %remote? shows (IPython's inspector)
    assert doc is not None and RemoteMagics.remote.__doc__ == doc.split("\n", 1)[0]
    assert doc.startswith("Run a bash or Python cell") and help_text() in doc
    for flag in _option_strings(PARSERS["%%remote"]):
        assert flag in doc or flag == "--cell-line", flag  # --cell-line: %autoremote's, not the user's
    for word in ("%%remote", "%remote", "bash", "python", "RemoteError", ".monarch/", "Ctrl-C"):
        assert word in doc


def test_saved_results_display_as_a_table():
    from monarch_jupyter.remote.view.results import RankResult

    results = RemoteResults(
        [
            RankResult("hosts=0", "hosts", {"hosts": 0}, 0, "ok", 0, "a\nlast <b>\n", "", 0.5),
            RankResult("hosts=1", "hosts", {"hosts": 1}, 1, "timed_out", None, "", "", None),
        ]
    )
    bundle = results._repr_mimebundle_()
    lines = bundle["text/plain"].splitlines()
    assert lines[0].split() == ["rank", "status", "rc", "time", "last", "stdout", "line"]
    assert lines[1].split() == ["hosts=0", "ok", "0", "0.50", "s", "last", "<b>"]
    assert lines[2].split() == ["hosts=1", "timed", "out"]
    assert "last &lt;b&gt;" in bundle["text/html"]
    assert results["hosts=1"].status == "timed_out" and results.returncodes == {"hosts=0": 0, "hosts=1": None}


def test_fed_lines_are_cut_only_where_shown():
    from monarch_jupyter.remote.view.model import OUT, RankState

    rank = RankState(label="hosts=0", mesh="hosts", point={"hosts": 0}, rank=0)
    assert rank.feed(OUT, "par") is None
    fed = rank.feed(OUT, "tial\nb\nc\rC\nrest")
    assert fed.count == 3 and rank.pending[OUT] == "rest"
    assert fed.first() == "partial"
    assert fed.last(1) == ["C"] and fed.last(2) == ["b", "C"]
    assert fed.last(3) == fed.last(10) == ["partial", "b", "C"]
    assert list(rank.lines) == [(OUT, "partial"), (OUT, "b"), (OUT, "C")]
    big = rank.feed(OUT, "\n" + "".join(f"{i}\n" for i in range(100_000)), newlines=100_001)
    assert big.first() == "rest" and big.last(2) == ["99998", "99999"]
    assert rank.counts[OUT] == 3 + 100_001


# ── bounded memory: giant lines ──
def _reference_lines(text: str) -> list[str]:
    """What a terminal shows, line by line, cut as the model cuts: from the whole text at once."""
    from monarch_jupyter.remote.view.lines import clip

    pieces = text.split("\n")
    if pieces[-1] == "":
        pieces.pop()
    return [clip(visible(piece)) for piece in pieces]


def test_a_giant_line_without_newline_costs_a_line_not_its_size():
    from monarch_jupyter.remote.view.lines import LINE_CHARS, TAIL_CHARS

    s = _state(1)
    rank = s.ranks[0]
    chunk = "x" * (1 << 20)
    for _ in range(50):  # 50 MB without a newline, in the actor's 1 MB chunks
        assert s.apply(Output(0, OUT, chunk)) == []
        assert len(rank.pending[OUT]) <= LINE_CHARS
    assert rank.partial(OUT) == "x" * LINE_CHARS + f" … (+{50 * (1 << 20) - LINE_CHARS} chars)"
    s.apply(Exited(0, 0, 1.0))
    s.apply(Finished())
    (line,) = [text for _, text in rank.lines]
    assert line == "x" * LINE_CHARS + f" … (+{50 * (1 << 20) - LINE_CHARS} chars)"
    assert rank.lines.chars <= TAIL_CHARS and rank.partial(OUT) == ""
    assert len(json.dumps(s.to_mime())) < 10_000


def test_the_tail_is_bounded_in_characters_too():
    from monarch_jupyter.remote.view.lines import LINE_CHARS, TAIL_CHARS

    s = _state(1)
    s.apply(Output(0, OUT, ("y" * 100_000 + "\n") * 300))
    rank = s.ranks[0]
    assert rank.counts[OUT] == 300 and rank.lines.chars <= TAIL_CHARS
    assert all(len(text) <= LINE_CHARS + 40 for _, text in rank.lines)
    assert 0 < len(rank.lines) < TAIL_LINES and rank.truncated == 300 - len(rank.lines)
    assert s.to_mime()["ranks"][0]["truncated"] == rank.truncated


@pytest.mark.parametrize("seed", range(40))
def test_bounded_lines_match_the_whole_text_however_it_is_chunked(seed):
    """Cutting an unfinished line early must not change what is shown: compare with the
    whole text split at once, for random text of long runs, \\r and \\n in random chunks."""
    import random

    from monarch_jupyter.remote.view.lines import LINE_CHARS

    rnd = random.Random(seed)
    parts = []
    for _ in range(rnd.randint(1, 30)):
        kind = rnd.random()
        if kind < 0.5:
            parts.append(
                rnd.choice("abcé") * rnd.choice([1, 5, LINE_CHARS - 1, LINE_CHARS, LINE_CHARS + 1, 7000])
            )
        elif kind < 0.75:
            parts.append("\r" * rnd.randint(1, 2))
        else:
            parts.append("\n")
    text = "".join(parts)
    s = _state(1)
    cuts = (
        sorted(rnd.sample(range(1, len(text)), min(len(text) - 1, rnd.randint(0, 12))))
        if len(text) > 1
        else []
    )
    for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True):
        s.apply(Output(0, OUT, text[a:b]))
    s.apply(Exited(0, 0, 0.1))
    expected = _reference_lines(text)
    got = [line for _, line in s.ranks[0].lines]
    assert got == expected[-len(got) :] and s.ranks[0].counts[OUT] == len(expected)


# ── the saved payload against its schema ──
jsonschema = pytest.importorskip("jsonschema")


def _validator():
    from monarch_jupyter.schema import SCHEMA

    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA)


def test_payloads_the_model_writes_match_the_schema():
    validator = _validator()
    s = _state(4)
    s.apply(Started(0, 11))
    s.apply(Output(0, OUT, "a\nb\rc\n"))
    s.apply(Output(1, ERR, "z" * 10_000))
    s.apply(Exited(0, 0, 0.1))
    s.apply(Lost(2, "worker process 99 died"))
    s.apply(Stopping("interrupted"))
    s.apply(Finished("stopped"))
    payload = s.to_mime()
    validator.validate(payload)
    assert {r["status"] for r in payload["ranks"]} == {"ok", "failed", "interrupted"}
    assert {r["status"] for r in _state(1).to_mime()["ranks"]} == {"pending"}  # a run not yet finished
    validator.validate(_state(1).to_mime())
    bad = json.loads(json.dumps(payload))
    bad["ranks"][0]["status"] = "exploded"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)
    bad = json.loads(json.dumps(payload))
    bad["summary"]["running"] = 1  # the summary counts final statuses only
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)


def test_a_detached_runs_running_payload_says_so_and_matches_the_schema():
    """No cell replaces a detached run's payload when it ends: saved later, it must not say the
    run was still running, so it carries ``detached`` and its HTML says only how to see it."""
    validator = _validator()
    s = _state(2)
    s.run_id = "20261201-010203-abc123"
    attached, detached = s.running_bundle(), s.running_bundle(detached=True)
    assert "detached" not in attached[MIME_TYPE] and "still running" in attached["text/html"]
    assert detached[MIME_TYPE]["detached"] is True and detached[MIME_TYPE]["state"] == "running"
    assert "still running" not in detached["text/html"] and "started detached" in detached["text/html"]
    validator.validate(detached[MIME_TYPE])
    bad = dict(detached[MIME_TYPE], detached=False)  # only ever present as true
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)


def test_todays_saved_payloads_still_match_the_schema():
    """Old notebooks must keep rendering: the frozen version-1 payloads (and those in
    notebooks/) are valid, so the renderer, checked against the same schema, reads them."""
    from pathlib import Path

    validator = _validator()
    root = Path(__file__).resolve().parents[2]
    fixtures = json.loads((root / "tests/fixtures/remote-run-v1.json").read_text())
    assert set(fixtures) == {"saved-in-notebook", "mixed-statuses"}
    for payload in fixtures.values():
        validator.validate(payload)
    seen = 0
    for notebook in sorted((root / "notebooks").glob("*.ipynb")):
        for cell in json.loads(notebook.read_text())["cells"]:
            for output in cell.get("outputs", []):
                payload = output.get("data", {}).get("application/vnd.monarch.remote+json")
                if payload is not None:
                    validator.validate(payload)
                    seen += 1
    assert seen >= 3


def test_the_model_names_the_schema_statuses():
    from monarch_jupyter import schema
    from monarch_jupyter.remote.view import model

    named = {
        model.RUNNING,
        model.OK,
        model.FAILED,
        model.TIMED_OUT,
        model.SKIPPED,
        model.INTERRUPTED,
        model.PENDING,
    }
    assert named == set(schema.STATUSES)
    assert model.STATUSES == schema.FINAL_STATUSES and set(schema.FAILING_STATUSES) == model.FAILING
    assert set(schema.FAILING_STATUSES) <= set(schema.FINAL_STATUSES) <= set(schema.STATUSES)
    assert model.MIME_TYPE == "application/vnd.monarch.remote+json" and model.VERSION == 2
    with pytest.raises(ValueError, match="not a status"):
        schema.status("exploded")


def test_old_run_logs_are_pruned_by_name_age(tmp_path):
    from monarch_jupyter.remote.run.runner import prune_logs

    names = [f"202612{day:02d}-120000-abcdef.log" for day in range(1, 8)]
    for name in reversed(names):  # created newest first: only the names tell the age
        (tmp_path / name).write_text("")
    (tmp_path / "notes.txt").write_text("")
    prune_logs(str(tmp_path), 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [*names[-3:], "notes.txt"]
    prune_logs(str(tmp_path / "missing"), 3)  # no folder: nothing to do


# ── a detached run's events between cells (remote/run/follow.py) ──────────
def test_background_follow_applies_events_tick_by_tick_until_the_end():
    from monarch_jupyter.remote.run.follow import BackgroundFollow, BoundedSink
    from monarch_jupyter.remote.view import model

    class Handle:
        future = None

    scheduled = []
    ticks = []

    class Grid:  # an observer with on_tick, as the run grid
        def on_event(self, state, event): ...

        def on_tick(self, state):
            ticks.append(state.ranks[0].total_lines)

    state = model.RunState(
        command="x",
        mode="bash",
        target="t",
        ranks=[model.RankState("hosts=0", "hosts", {"hosts": 0}, 0)],
        started=0.0,
        observers=[Grid()],
        run_id="r",
    )
    sink = BoundedSink(limit=3)
    follow = BackgroundFollow(state, sink, Handle(), lambda delay, fn: scheduled.append((delay, fn)))
    follow.start()
    assert scheduled == [(0, follow.tick)]
    sink.put(model.Started(0))
    for i in range(5):  # a flood while a cell runs: output beyond the bound is counted, not kept
        sink.put(model.Output(0, model.OUT, f"line {i}\n"))
    assert sink.dropped == 3
    scheduled.pop()[1]()
    assert state.ranks[0].total_lines == 2 and ticks == [2] and not state.finished
    assert scheduled and scheduled[-1][0] == follow.interval  # re-armed
    sink.put(model.Exited(0, 0, 1.0))
    sink.put(model.Finished())
    scheduled.pop()[1]()
    assert state.finished and state.ranks[0].status == model.OK
    assert scheduled == []  # not re-armed after the end


def test_background_follow_ends_the_run_when_the_drive_died_silently():
    import concurrent.futures

    from monarch_jupyter.remote.run.follow import BackgroundFollow, BoundedSink
    from monarch_jupyter.remote.view import model

    future = concurrent.futures.Future()
    future.set_exception(RuntimeError("loop gone"))

    class Handle:
        pass

    handle = Handle()
    handle.future = future
    state = model.RunState(
        command="x",
        mode="bash",
        target="t",
        ranks=[model.RankState("hosts=0", "hosts", {"hosts": 0}, 0)],
        started=0.0,
    )
    follow = BackgroundFollow(state, BoundedSink(), handle, lambda delay, fn: None)
    follow.tick()
    assert state.finished and "loop gone" in (state.error or "")


def test_a_cell_line_is_parsed_once_and_each_cell_keeps_its_command():
    from monarch_jupyter.remote.view import args as remote_args

    first = parse_cell("--rank 0 python", "print(1)")
    second = parse_cell("--rank 0 python", "print(2)")
    assert (first.command, second.command) == ("print(1)", "print(2)")
    assert first.ranks == second.ranks == (0,) and first.mode == second.mode == "python"
    hits = remote_args._cell_flags.cache_info().hits
    parse_cell("--rank 0 python", "x")
    assert remote_args._cell_flags.cache_info().hits == hits + 1
    for _ in range(2):  # an error is raised every time, never kept as a result
        with pytest.raises(ArgumentsError, match="--bogus"):
            parse_cell("--bogus python", "x")
    with pytest.raises(ArgumentsError, match="empty"):  # a known line with an empty cell
        parse_cell("--rank 0 python", "  \n")


@pytest.mark.parametrize("cut", ["before the add", "after the add"])
def test_a_ctrl_c_between_apply_and_add_keeps_the_lines_in_the_cell(cut):
    # Stopping an attach with Ctrl-C lost a batch of lines from the cell (the log kept them): the
    # interrupt landed after state.apply, before the renderer queued its lines.
    from monarch_jupyter.remote.cell.magic import _apply

    class Interrupted(TextRenderer):
        calls = 0  # reset per test below

        def add(self, fed, only_missing=False):
            Interrupted.calls += 1
            if Interrupted.calls == 2:  # the second event's add
                if cut == "after the add":
                    super().add(fed, only_missing)
                raise KeyboardInterrupt
            super().add(fed, only_missing)

    Interrupted.calls = 0
    state = _state(1)
    renderer = Interrupted(state)
    _apply(state, renderer, Output(0, OUT, "1\n2\n"))
    with pytest.raises(KeyboardInterrupt):
        _apply(state, renderer, Output(0, OUT, "3\n4\n5\n"))
    _apply(state, renderer, Output(0, OUT, "6\n"))
    shown = [line.split()[-1] for line in renderer.flush(0.0, force=True).splitlines()]
    assert shown == ["1", "2", "3", "4", "5", "6"]  # none lost, none twice


def test_ctrl_c_is_counted_while_the_pump_runs_and_raised_again_after():
    import os
    import signal
    import time

    from monarch_jupyter.remote.cell.magic import _CtrlC

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("another SIGINT handler is installed here")
    with _CtrlC() as ctrl_c:
        for _ in range(2):
            os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt in the middle of anything
            time.sleep(0.01)
        assert ctrl_c.count == 2
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python's again
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)


def test_worker_health_reads_each_workers_stat_once_opened():
    """A worker killed after its first check is gone as soon as it is a zombie (as _procfs.alive
    says), and still gone once reaped; a pid that is no worker any more is let go; a dead pid is
    reported from the first look."""
    import subprocess
    import time

    from monarch_jupyter.remote.run.runner import RemoteRunner

    runner = RemoteRunner(session=None)
    alive = subprocess.Popen(["sleep", "30"])
    dying = subprocess.Popen(["sleep", "30"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        assert runner._exited({alive.pid, dying.pid, gone.pid}) == {gone.pid}
        assert set(runner._stat_fds) == {alive.pid, dying.pid}  # kept open from now on
        dying.kill()  # not reaped: a zombie
        deadline = time.monotonic() + 5
        while runner._exited({alive.pid, dying.pid}) != {dying.pid}:
            assert time.monotonic() < deadline, "a zombie worker was not seen as gone"
            time.sleep(0.01)
        dying.wait()  # reaped: its pid may be anyone's now, the open stat file says gone
        assert runner._exited({alive.pid, dying.pid}) == {dying.pid}
        assert runner._exited({alive.pid}) == set()
        assert set(runner._stat_fds) == {alive.pid}  # the other's file was closed
    finally:
        for proc in (alive, dying):
            proc.kill()
            proc.wait()


# ── the saved payload names exactly the schema's properties ──
def test_the_payload_properties_are_the_schemas():
    """A property written only in Python (the renderer would drop it) fails here and in the
    validator (``additionalProperties: false``)."""
    from monarch_jupyter.schema import SCHEMA

    s = _state(2)
    s.run_id = "20261201-000000-abcdef"
    s.apply(Lost(1, "worker process 9 died"))
    s.apply(Finished())
    payload = s.to_mime()
    detached = s.running_bundle(detached=True, model_id="m1")[MIME_TYPE]  # "detached", "model_id": there only
    streamed = s.mime_bundle(lines=False, own_cell=True)[MIME_TYPE]  # "streamed", "own_cell": there only
    assert (
        set(payload) | set(detached) | set(streamed) == set(SCHEMA["properties"])
        and SCHEMA["additionalProperties"] is False
    )
    rank = SCHEMA["$defs"]["rank"]
    assert set(payload["ranks"][1]) == set(rank["properties"]) and rank["additionalProperties"] is False
    validator = _validator()
    for bad in ({**payload, "extra": 1}, {**payload, "ranks": [{**payload["ranks"][0], "extra": 1}]}):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(bad)


# ── time formats ──
def test_the_time_formats():
    import datetime as dt

    from monarch_jupyter.text import timefmt as _timefmt

    ts = dt.datetime(2026, 12, 1, 13, 3, 22, tzinfo=dt.timezone.utc).timestamp()
    assert _timefmt.utc_iso(ts) == "2026-12-01T13:03:22Z" and _timefmt.utc_stamp(ts) == "20261201-130322"
    assert _timefmt.local_time(ts) == dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")
    assert _timefmt.local_time(None) == _timefmt.local_time(0) == "-"
    assert re.fullmatch(r"\d{8}-\d{6}", _timefmt.utc_stamp())
    assert [_timefmt.span(v) for v in (None, 12.46, 90, 7200)] == ["-", "12.5 s", "1.5 min", "2.0 h"]
    assert _timefmt.seconds(0.4249) == "0.42 s"


# ── verbs: a registry of parser + handler ──
def test_each_verb_has_its_parser_and_a_handler_taking_its_options():
    import inspect

    from monarch_jupyter.remote.cell import verbs
    from monarch_jupyter.remote.view import args

    assert (
        list(verbs.REGISTRY)
        == list(VERBS)
        == ["runs", "attach", "stop", "stacks", "grep", "debug", "shell", "session", "pull", "push"]
    )
    for name, verb in verbs.REGISTRY.items():
        assert verb.parser is VERBS[name] and verb.parser.prog == f"%remote {name}"
        dests = {a.dest for a in verb.parser._actions if a.dest != "help"}
        dests |= {args.VERBATIM[name]} if name in args.VERBATIM else set()  # the rest of the line
        assert set(list(inspect.signature(verb.handler).parameters)[1:]) == dests, name
        assert f"%remote {name}" in help_text()


class _Cell:
    """A verb's cell without IPython."""

    def __init__(self, runner=None):
        self.session = None
        self.runner = runner
        self.written = []

    def write(self, text):
        self.written.append(text)


def test_a_new_verb_is_one_entry(monkeypatch):
    """The recipe of remote/cell/verbs.py: an entry there (parser + handler) and an endpoint."""
    from monarch_jupyter.remote.cell import verbs
    from monarch_jupyter.remote.cell.verbs import registry
    from monarch_jupyter.remote.view import args

    monkeypatch.setattr(args, "VERBS", args.VERBS.copy())
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))

    @verbs.verb("threads", "each rank's threads", verbs.arg("--native", action="store_true", help="C too"))
    def threads(cell, native):
        for text in cell.runner.call_all("threads", native):
            cell.write(text)

    class Runner:
        def call_all(self, endpoint, *call_args):
            return [f"{endpoint}{call_args} from rank {rank}\n" for rank in range(2)]

    line = parse_line("threads --native")
    assert line == RemoteVerb("threads", {"native": True})
    cell = _Cell(Runner())
    verbs.dispatch(cell, line.verb, line.options)
    assert cell.written == ["threads(True,) from rank 0\n", "threads(True,) from rank 1\n"]
    assert "%remote threads [--native]" in help_text() and "each rank's threads" in help_text()
    with pytest.raises(ValueError, match="defined twice"):
        verbs.verb("threads", "again")(threads)


def test_stop_wants_runs_or_all_not_both():
    from monarch_jupyter.remote.cell import verbs

    for options in ({"runs": [], "all_runs": False}, {"runs": ["abc"], "all_runs": True}):
        with pytest.raises(ArgumentsError, match=r"^%remote stop RUN… \| --all \(%remote runs lists them\)$"):
            verbs.dispatch(_Cell(), "stop", options)


def test_stop_of_a_finished_run_says_it_had_already_finished(monkeypatch):
    from monarch_jupyter.remote.cell import verbs
    from monarch_jupyter.remote.run import index

    def entry(run_id, state):
        return index.RunEntry(
            run_id, f"/x/{run_id}.json", "sleep 9", "cmd", "mesh hosts", 0.0, "/h", [], state=state
        )

    done, stopped, live = (
        entry("r-done", index.FINISHED),
        entry("r-stopped", index.STOPPED),
        entry("r-live", index.RUNNING),
    )
    monkeypatch.setattr(verbs.runs, "run_entries", lambda session: [done, stopped, live])
    monkeypatch.setattr(verbs.runs, "survey", lambda runner, entries: entries)

    class Runner:
        asked = None

        def stop_runs(self, entries, by=None):
            Runner.asked = [e.id for e in entries]
            return {e.id: 3 for e in entries}

    cell = _Cell(Runner())
    verbs.dispatch(cell, "stop", {"runs": ["r-done", "r-stopped", "r-live"], "all_runs": False})
    assert Runner.asked == ["r-live"]
    assert cell.written == [
        "run r-done had already finished (ok); nothing to stop\n",
        "run r-stopped had already been stopped (stopped); nothing to stop\n",
        "stopped run r-live (3 processes signalled)\n",
    ]
    # #42: nothing signalled is never "stopped"
    Runner.stop_runs = lambda self, entries, by=None: {}  # type: ignore[method-assign]
    cell = _Cell(Runner())
    verbs.dispatch(cell, "stop", {"runs": ["r-live"], "all_runs": False})
    assert cell.written[0].startswith("run r-live: no process of it was found to signal")
    assert "stopped run" not in cell.written[0] and cell.written[0].count("\n") == 1


# ── the runner: ask every rank ──
def test_call_all_asks_every_mesh_once_per_host_with_the_warm_actors(tmp_path):
    from types import SimpleNamespace

    from monarch_jupyter.remote.errors import RemoteError
    from monarch_jupyter.remote.run import runner as R
    from monarch_jupyter.runtime.loop import EventLoopThread

    calls = []

    class Answers:  # a ValueMesh
        def __init__(self, values):
            self._values = values

        def values(self):
            return iter(self._values)

    class Endpoint:
        def __init__(self, mesh):
            self.mesh = mesh

        async def call(self, *args):
            calls.append((self.mesh, args))
            return Answers([f"{self.mesh}.{rank}:{args}" for rank in range(2)])

    class Actors:
        def __init__(self, mesh):
            self.runs_state = Endpoint(mesh)

    job = SimpleNamespace(apply_id="apply-1")
    state = SimpleNamespace(_hosts={"a": None, "b": None})
    session = SimpleNamespace(
        running=lambda: (job, state, str(tmp_path), "default"), loop=EventLoopThread("t")
    )
    runner = R.RemoteRunner(session)
    for mesh in ("a", "b"):
        runner._warm[R._WarmKey("apply-1", mesh, ())] = R._Warm(None, Actors(mesh), {"hosts": 2}, ("hosts",))
    runner._warm[R._WarmKey("apply-1", "a", (("gpu", 2),))] = R._Warm(None, None, {}, ())  # another shape
    assert runner.call_all("runs_state", ["r1"]) == [
        "a.0:(['r1'],)",
        "a.1:(['r1'],)",
        "b.0:(['r1'],)",
        "b.1:(['r1'],)",
    ]
    assert calls == [("a", (["r1"],)), ("b", (["r1"],))]
    state._hosts = {}
    with pytest.raises(RemoteError, match="no host meshes"):
        runner.call_all("runs_state", ["r1"])


# ── --per-host is bounded like --local ──
def test_per_host_alone_beyond_the_bound_is_refused_when_parsed():
    with pytest.raises(ArgumentsError) as info:
        parse_cell("--per-host gpu=100000", "x")
    assert str(info.value) == (
        "%%remote: argument --per-host: gpu=100000 is 100000 procs on each host, more than the bound of "
        "64 procs a run; to raise it deliberately: %env MONARCH_JUPYTER_MAX_PROCS=100000 (see %%remote?)"
    )


def test_hosts_times_per_host_beyond_the_bound_is_refused_before_anything_starts(monkeypatch):
    from monarch_jupyter.remote.errors import RemoteError
    from monarch_jupyter.remote.view.args import check_procs

    monkeypatch.delenv("MONARCH_JUPYTER_MAX_PROCS", raising=False)
    check_procs({"hosts": 2}, (("gpu", 4), ("cpu", 8)))  # 64: at the bound
    with pytest.raises(RemoteError) as info:
        check_procs({"hosts": 2, "aux": 1}, (("gpu", 4), ("cpu", 8)))
    assert str(info.value) == (
        "--per-host gpu=4,cpu=8 on 3 hosts would start 96 procs, more than the bound of 64 procs a run; "
        "to raise it deliberately: %env MONARCH_JUPYTER_MAX_PROCS=96"
    )
    monkeypatch.setenv("MONARCH_JUPYTER_MAX_PROCS", "96")
    check_procs({"hosts": 2, "aux": 1}, (("gpu", 4), ("cpu", 8)))
    check_procs({"hosts": None}, (("gpu", 96),))  # a mesh of unknown size counts as one host


def test_warm_actors_are_spawned_once_when_a_grid_request_and_a_cell_ask_together(tmp_path):
    """The grid's requests run on a thread of their own: with the cell's plan at the same time,
    one spawn per mesh, not one each; a mesh forgotten from the loop is respawned next time."""
    import threading
    import time
    from types import SimpleNamespace

    from monarch_jupyter.remote.run import runner as R
    from monarch_jupyter.runtime.loop import EventLoopThread

    class Answers:
        def values(self):
            return iter(["ok"])

    class Endpoint:
        async def call(self, *args):
            return Answers()

    spawned = []

    def spawn(mesh, name, per_host):
        spawned.append(name)
        time.sleep(0.2)  # as Monarch's spawn: long enough for the other thread to arrive
        return R._Warm(None, SimpleNamespace(runs_state=Endpoint()), {"hosts": 1}, ("hosts",))

    job = SimpleNamespace(apply_id="apply-1")
    state = SimpleNamespace(_hosts={"a": None})
    session = SimpleNamespace(
        running=lambda: (job, state, str(tmp_path), "default"), loop=EventLoopThread("t")
    )
    runner = R.RemoteRunner(session)
    runner._spawn = spawn
    threads = [threading.Thread(target=runner.call_all, args=("runs_state",)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert spawned == ["a"]
    runner.forget("a")
    assert runner.call_all("runs_state") == ["ok"] and spawned == ["a", "a"]


def test_prewarm_spawns_the_first_meshs_actors_once_and_never_waits_for_a_plan():
    """After a restart's background attach the first mesh's actors are spawned in a plain run's
    shape, once; while a plan holds the runner's lock (it spawns what it needs) prewarm gives up."""
    import threading
    from pathlib import Path

    from monarch_jupyter.remote.run import runner as R
    from monarch_jupyter.remote.run.index import Where

    runner = R.RemoteRunner(session=None)
    where = Where(Path("/nowhere"), Path("/nowhere/runs"), "default")
    runner._current = lambda: R._Job(object(), {"hosts": "mesh0", "other": "mesh1"}, "a1", where, {})
    spawned = []

    def spawn(host_mesh, name, per_host):
        spawned.append((host_mesh, name, per_host))
        return R._Warm(object(), object(), {"hosts": 2}, ("hosts",))

    runner._spawn = spawn
    assert runner.prewarm() is True
    assert spawned == [("mesh0", "hosts", ())]
    assert list(runner._warm) == [R._WarmKey("a1", "hosts", ())]
    assert runner.prewarm() is False and len(spawned) == 1  # warm already
    runner._warm.clear()
    held, release = threading.Event(), threading.Event()

    def plan_in_progress():
        with runner._warm_lock:
            held.set()
            release.wait(5)

    planner = threading.Thread(target=plan_in_progress)
    planner.start()
    held.wait(5)
    try:
        assert runner.prewarm() is False and len(spawned) == 1
    finally:
        release.set()
        planner.join()


class _FoundActors:
    """Stands in for a pickled Monarch actor mesh: ``ping.call()`` answers its procs' pids."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids

    @property
    def ping(self):
        from types import SimpleNamespace

        return SimpleNamespace(call=self._call)

    async def _call(self):
        return {i: pid for i, pid in enumerate(self.pids)}


def _found_setup(tmp_path, monkeypatch):
    """A notebook folder, a loop, and ``kernel(apply_id, local)``: a new runner (a kernel of the
    job) and its running job, whose spawns are recorded in ``spawned``."""
    from types import SimpleNamespace

    from monarch_jupyter.remote.run import runner as R
    from monarch_jupyter.remote.run.index import Where
    from monarch_jupyter.runtime.loop import EventLoopThread

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    runs = tmp_path / "nb" / ".monarch" / "default" / "runs"
    runs.mkdir(parents=True, mode=0o700)
    for folder in (runs.parent, runs.parent.parent, runs.parent.parent.parent):
        folder.chmod(0o700)
    where = Where(tmp_path / "nb", runs, "default")
    session = SimpleNamespace(loop=EventLoopThread("t"))
    spawned: list[str] = []

    def spawn(host_mesh, name, per_host):
        spawned.append(name)
        return R._Warm(object(), _FoundActors([11, 12]), {"hosts": 2}, ("hosts",), [11, 12])

    def kernel(apply_id="a1", local=None):
        runner = R.RemoteRunner(session)
        runner._spawn = spawn
        return runner, R._Job(object(), {"hosts": "mesh0"}, apply_id, where, local or {})

    return R, kernel, spawned, runs.parent / R.FOUND_FILE


def test_a_plain_runs_actors_are_found_again_by_the_next_kernel_of_the_same_job(tmp_path, monkeypatch):
    """What a kernel spawned for a plain run is kept (pickled, signed) and found again after a
    restart when it answers with the same procs; another allocation, another mesh, a dead proc
    of a local worker or a mesh whose rank was lost are spawned anew."""
    import os

    R, kernel, spawned, path = _found_setup(tmp_path, monkeypatch)
    first, running = kernel()
    first._warm_for(running, "hosts", ())
    assert spawned == ["hosts"] and path.exists()
    again, running = kernel()  # the next kernel: found, not spawned
    warm = again._warm_for(running, "hosts", ())
    assert spawned == ["hosts"] and warm.procs is None and warm.proc_pids == [11, 12]
    assert warm.sizes == {"hosts": 2} and warm.host_dims == ("hosts",)
    again._evict(keep=0)  # found actors are never stopped from here: their procs end with the job
    assert kernel("a2")[0]._find(kernel("a2")[1], "hosts") is None  # another allocation
    assert again._find(running, "other") is None
    local, running_here = kernel(local={"hosts_0": os.getpid()})  # workers on this machine
    monkeypatch.setattr(R._procfs, "alive", lambda pid, ticks=None: pid in (11, 12))
    assert local._find(running_here, "hosts") is not None
    monkeypatch.setattr(R._procfs, "alive", lambda pid, ticks=None: pid != 12)  # a local worker's proc died
    assert local._find(running_here, "hosts") is None
    lost, running = kernel()
    lost.forget("hosts")
    lost._forgotten.pop()
    lost._not_found.add("hosts")  # what _current does with a forgotten mesh
    assert lost._find(running, "hosts") is None


def test_actors_are_not_found_from_other_code_a_foreign_file_other_procs_or_a_live_kernel(
    tmp_path, monkeypatch
):
    """Another version of the code, a file not signed by this user's kernels, actors answering
    from other procs, or actors of a kernel still running (a second notebook, which may stop
    them): spawned anew."""
    import os
    import pickle

    from monarch_jupyter.jobs import signing as _signing

    R, kernel, spawned, path = _found_setup(tmp_path, monkeypatch)
    first, running = kernel()
    first._warm_for(running, "hosts", ())
    assert kernel()[0]._find(running, "hosts") is not None
    monkeypatch.setattr(R, "_VERSION", ["other code"])
    assert kernel()[0]._find(running, "hosts") is None
    monkeypatch.setattr(R, "_VERSION", [])
    record = pickle.loads(path.read_bytes())
    record["kernel"] = (os.getppid(), None)  # spawned by a kernel still running, not a restart
    path.write_bytes(pickle.dumps(record))
    _signing.sign(path, path.read_bytes())
    assert kernel()[0]._find(running, "hosts") is None
    first._save_found(running, "hosts", first._warm[R._WarmKey("a1", "hosts", ())])
    path.write_bytes(path.read_bytes() + b" ")  # not what this user's kernels signed
    assert kernel()[0]._find(running, "hosts") is None
    moved, running = kernel()
    moved._save_found(
        running, "hosts", R._Warm(object(), _FoundActors([13, 14]), {"hosts": 2}, ("hosts",), [11, 12])
    )
    assert kernel()[0]._find(running, "hosts") is None  # other procs answer at those addresses
    assert spawned == ["hosts"]


# ── a run stopped from elsewhere says who stopped it, not "failed" ──
def test_a_run_a_host_says_was_stopped_ends_interrupted_and_says_by_whom():
    s = _state(2)
    s.apply(Started(0))
    s.apply(Started(1))
    s.apply(Exited(0, -2, 1.0, error="KeyboardInterrupt", stopped_by="%job kill (kernel pid 42)"))
    s.apply(Exited(1, -2, 1.0))
    s.apply(Finished())
    assert [r.status for r in s.ranks] == ["interrupted", "interrupted"]
    line = s.summary_line()
    assert "0 failed" in line and "2 interrupted" in line
    assert "stopped by %job kill (kernel pid 42)" in line


def test_without_a_stop_a_nonzero_exit_is_a_failure():
    s = _state(1)
    s.apply(Started(0))
    s.apply(Exited(0, 3, 1.0))
    assert s.ranks[0].status == "failed" and "stopped by" not in s.summary_line()


# ── the result after streamed lines repeats none of them ──
def test_a_streamed_result_carries_no_lines_and_its_html_no_tails():
    s = _state(2)
    s.apply(Started(0))
    s.apply(Output(0, OUT, "shown-once\n"))
    s.apply(Output(0, ERR, "to-stderr\n"))
    s.apply(Exited(0, 1, 1.0))
    s.apply(Exited(1, 0, 1.0))
    s.apply(Finished())
    streamed = s.mime_bundle(lines=False)
    payload = streamed[MIME_TYPE]
    assert payload["streamed"] is True and all(r["lines"] == [] for r in payload["ranks"])
    assert "shown-once" not in streamed["text/html"] and "last lines" not in streamed["text/html"]
    _validator().validate(payload)
    drawn = s.mime_bundle()  # a view drew the lines and the cell was cleared: the result has them
    assert "streamed" not in drawn[MIME_TYPE] and "shown-once" in drawn["text/html"]
    # stderr is marked and a failure coloured in the HTML copy, not by colour alone
    assert "class='monarch-stderr' title='stderr'" in drawn["text/html"]
    assert (
        "<b style='color:var(--jp-error-color1" in drawn["text/html"] and ">failed</b>" in drawn["text/html"]
    )


# ── a run that waits for its ranks' actors says so at once ──
def test_a_plan_that_spawns_or_waits_says_starting_once():
    import threading
    from types import SimpleNamespace

    from monarch_jupyter.remote.run.runner import RemoteRunner

    runner = RemoteRunner(session=SimpleNamespace())
    said: list[int] = []
    runner.on_starting = lambda: said.append(1)
    spawned: list[str] = []
    runner._spawn = lambda mesh, name, per_host: spawned.append(name) or SimpleNamespace()  # type: ignore[method-assign]
    runner._evict = lambda keep: None  # type: ignore[method-assign]
    runner._find = lambda running, name: None  # type: ignore[method-assign]  # no actors saved
    runner._save_found = lambda running, name, warm: None  # type: ignore[method-assign]
    running = SimpleNamespace(apply_id="a1", meshes={"hosts": object(), "gpus": object()})
    runner._plan = lambda args: [runner._warm_for(running, name, ()) for name in ("hosts", "gpus")]  # type: ignore[method-assign]
    runner.plan(None)  # two meshes spawned: said once
    assert spawned == ["hosts", "gpus"] and said == [1]
    runner.plan(None)  # warm: nothing to wait for, nothing said
    assert said == [1]
    holder = threading.Thread(
        target=lambda: (runner._warm_lock.acquire(), time.sleep(0.3), runner._warm_lock.release())
    )
    holder.start()
    time.sleep(0.05)
    runner.plan(None)  # a warm-up holds the actors: a wait ahead, said before it
    holder.join()
    assert said == [1, 1]
