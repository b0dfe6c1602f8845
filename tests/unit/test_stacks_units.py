"""``%remote stacks``: folding rank stacks (pure), the verb with a stand-in cell and runner, and
the host side against real processes in a run folder (no Monarch worker)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from monarch_jupyter.remote.cell import verbs
from monarch_jupyter.remote.host import dumps
from monarch_jupyter.remote.host.layout import MARKER, META, RUNS_DIR_ENV
from monarch_jupyter.remote.view import stacks
from monarch_jupyter.remote.view.args import RemoteVerb, help_text, parse_line
from monarch_jupyter.remote.wire import pyspy
from monarch_jupyter.text.parser import ArgumentsError
from monarch_jupyter.text.rank_sets import rank_set


def _frame(text: str) -> dict:
    """``name (file:line)`` or ``name (file)`` as a :class:`pyspy.Frame`."""
    name, _, where = text[:-1].rpartition(" (")
    file, _, line = where.rpartition(":") if ":" in where else (where, "", "0")
    return {"name": name, "file": file, "line": int(line)}


def dump(pid: int, tid: str, state: str, frames: list[str]) -> dict:
    thread = {"id": tid, "status": state, "name": "MainThread", "frames": [_frame(f) for f in frames]}
    return {
        "pid": pid,
        "state": "S",
        "wchan": "do_select",
        "cmd": "python -u -c …",
        "python": True,
        "threads": [thread],
        "more": 0,
    }


def rank(n: int, *processes: dict, folder: str | None = None, key: str = "hosts") -> dict:
    return {
        "key": key,
        "rank": n,
        "point": {"hosts": n},
        "folder": folder or f"/tmp/runs/r1/{key}.{n}",
        "state": "running",
        "returncode": None,
        "processes": list(processes),
    }


WAIT = ["wait (<string>:4)", "<module> (<string>:9)"]
ALLREDUCE = ["allreduce (train.py:88)", "<module> (<string>:9)"]


def test_identical_ranks_fold_and_an_outlier_unfolds():
    ranks = [rank(n, dump(100 + n, str(100 + n), "idle", WAIT)) for n in (0, 1, 2, 3, 4, 5, 6, 8)]
    ranks.append(rank(7, dump(107, "107", "active", ALLREDUCE)))
    text = stacks.render("r1", "python", sorted(ranks, key=lambda r: r["rank"]))
    lines = text.splitlines()
    assert lines[0] == "run r1 ('python'): 9 ranks, 2 different stacks"
    assert lines[1] == "hosts=[0-6,8] (8):"
    assert lines[2] == "    pid …: python -u -c …"
    assert lines[3] == '        Thread …: "MainThread"'
    assert lines[4] == "            wait (<string>:4)"
    seven = lines.index("hosts=7:")
    assert lines[seven + 1] == "    pid 107: python -u -c …"  # a group of one keeps its pids
    assert "allreduce (train.py:88)" in lines[seven + 3]
    assert "allreduce" not in "\n".join(lines[:seven])


def test_normalise_drops_pids_threads_addresses_and_the_rank_folder():
    a = rank(
        0,
        dump(11, "0x7F00AA", "idle", ["0x7f784b04524a (libc.so.6)", "f (/tmp/runs/r1/hosts.0/script.py:3)"]),
    )
    b = rank(
        1,
        dump(
            12,
            "0x7F00BB",
            "active+gil",
            ["0x7f0000000001 (libc.so.6)", "f (/tmp/runs/r1/hosts.1/script.py:3)"],
        ),
    )
    groups = stacks.fold([a, b])
    assert len(groups) == 1 and [r["rank"] for r in groups[0][0]] == [0, 1]
    assert "0x… (libc.so.6)" in groups[0][1] and "f ($RANK_DIR/script.py:3)" in groups[0][1]
    assert stacks.normalise("pid 12 S do_wait: bash -c x") == "pid … S do_wait: bash -c x"
    # a different line number, or a different wchan, does not fold
    c = rank(2, dump(13, "13", "idle", ["f (/tmp/runs/r1/hosts.2/script.py:4)"]))
    assert len(stacks.fold([a, c])) == 2
    p = {"pid": 5, "state": "S", "wchan": "hrtimer_nanosleep", "cmd": "sleep 30", "python": False}
    q = {**p, "pid": 6, "wchan": "pipe_read"}
    assert len(stacks.fold([rank(0, p), rank(1, {**p, "pid": 7})])) == 1
    assert len(stacks.fold([rank(0, p), rank(1, q)])) == 2


def test_process_lines_errors_and_ranks_without_processes():
    sleep = {"pid": 5, "state": "S", "wchan": "hrtimer_nanosleep", "cmd": "sleep 30", "python": False}
    assert stacks.process_text(sleep) == "pid 5 S hrtimer_nanosleep: sleep 30"
    failed = {**sleep, "python": True, "threads": None, "error": "py-spy took over 5 s"}
    assert stacks.process_text(failed).splitlines()[1] == "    (no stack: py-spy took over 5 s)"
    gone = {**rank(0), "state": "exited", "returncode": 0}
    assert stacks.rank_text(gone) == "(no process left: exited, rc 0)"
    assert "no rank" not in stacks.render("r1", "x", [gone])
    assert "none of its ranks is on the hosts" in stacks.render("r1", "x", [])


def test_merge_keeps_each_rank_once_and_several_meshes_are_named():
    a0, a1, b0 = rank(0), rank(1), rank(0, key="b")
    assert stacks.merge([[a1, a0], [a0, b0]]) == [b0, a0, a1]
    assert stacks._label([a0, a1, b0]) == "hosts/hosts=[0-1]; b/hosts=0"


def test_rank_set_in_clush_notation():
    hosts = [(("hosts", v),) for v in (0, 1, 2, 3, 4, 5, 6, 8)]
    assert rank_set(hosts, brackets=True) == "hosts=[0-6,8]"
    assert rank_set(hosts) == "hosts=0-6,8"
    assert rank_set([(("hosts", 7),)], brackets=True) == "hosts=7"


# ── the verb, with a stand-in cell and runner ──
@dataclass
class _Entry:
    id: str
    command: str
    is_running: bool = True


class _Runner:
    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def call_all(self, endpoint, *args):
        self.calls.append((endpoint, *args))
        return self.answers


class _Cell:
    def __init__(self, runner):
        self.session, self.runner, self.written = None, runner, []

    def write(self, text):
        self.written.append(text)


def test_the_verb_parses_and_asks_every_host(monkeypatch):
    entries = [_Entry("20261201T1-aaa", "python\nimport time"), _Entry("20261201T0-bbb", "sleep 30")]
    monkeypatch.setattr(verbs.diagnose, "run_entries", lambda session: entries)
    monkeypatch.setattr(verbs.diagnose, "running_entries", lambda session, runner: entries[:1])
    line = parse_line("stacks bbb --rank 1,0 --native")
    assert line == RemoteVerb(
        "stacks",
        {"run": "bbb", "ranks": (1, 0), "point": None, "native": True, "actors": False, "session": None},
    )
    one = rank(0, {"pid": 5, "state": "S", "wchan": "hrtimer_nanosleep", "cmd": "sleep 30", "python": False})
    runner = _Runner([[one], [one]])  # two hosts on one machine: the rank once
    cell = _Cell(runner)
    verbs.dispatch(cell, line.verb, line.options)
    assert runner.calls == [("stacks", "20261201T0-bbb", [1, 0], None, True)]
    assert cell.written == [
        "run 20261201T0-bbb ('sleep 30'): 1 rank, 1 different stack\n"
        "hosts=0:\n    pid 5 S hrtimer_nanosleep: sleep 30\n"
    ]
    line = parse_line("stacks --point hosts=1")
    cell = _Cell(runner)
    verbs.dispatch(cell, line.verb, line.options)  # the newest running run
    assert runner.calls[-1] == ("stacks", "20261201T1-aaa", None, {"hosts": 1}, False)
    assert (
        "%remote stacks [--rank N[,M…]] [--point DIM=N,…] [--native] [--actors] [--session [NAME]] [RUN]"
        in " ".join(help_text().split())
    )
    with pytest.raises(ArgumentsError, match="exclude each other"):
        verbs.dispatch(
            cell, "stacks", {"run": None, "ranks": (0,), "point": (("hosts", 0),), "native": False}
        )


def test_the_verb_says_so_when_nothing_runs(monkeypatch):
    monkeypatch.setattr(verbs.diagnose, "running_entries", lambda session, runner: [])
    runner = _Runner([])
    cell = _Cell(runner)
    verbs.dispatch(cell, "stacks", {"run": None, "ranks": None, "point": None, "native": False})
    assert cell.written == [
        "no run is running in this context: %remote runs lists them, %remote stacks RUN picks one\n"
    ]
    assert runner.calls == []


# ── the host side, against real processes ──
def test_the_host_dumps_a_ranks_group_and_its_strays(tmp_path, monkeypatch):
    """A rank's group (a bash leader, a Python child) and a stray carrying the marker; ranks of
    another actor's host are left out."""
    monkeypatch.setenv(RUNS_DIR_ENV, str(tmp_path / "runs"))
    folder = tmp_path / "runs" / "r1" / "hosts.1"
    folder.mkdir(parents=True)
    (tmp_path / "runs" / "r1" / "hosts.0").mkdir()
    (tmp_path / "runs" / "r1" / "hosts.0" / META).write_text(
        json.dumps({"key": "hosts", "rank": 0, "point": {"hosts": 0}, "pid": 1})
    )
    env = {**os.environ, MARKER: "r1", "MONARCH_RANK_hosts": "1"}
    code = "import time\ndef sleeping_in_rank_one():\n    time.sleep(60)\nsleeping_in_rank_one()\n"
    leader = subprocess.Popen(
        ["bash", "-c", f"{sys.executable} -c '{code}' & sleep 60; wait"], env=env, start_new_session=True
    )
    stray = subprocess.Popen(["sleep", "61"], env=env, start_new_session=True)
    try:
        (folder / META).write_text(
            json.dumps({"key": "hosts", "rank": 1, "point": {"hosts": 1}, "pid": leader.pid})
        )
        deadline = time.monotonic() + 20  # until the Python child sleeps in its function (a loaded CPU)
        while True:
            [answer] = asyncio.run(dumps.run_stacks("r1", None, None, False, mine={"hosts": 1}))
            if "sleeping_in_rank_one" in str(answer) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert (answer["rank"], answer["state"], answer["point"]) == (1, "running", {"hosts": 1})
        cmds = {p["pid"]: p for p in answer["processes"]}
        assert leader.pid in cmds and stray.pid in cmds and cmds[stray.pid]["cmd"] == "sleep 61"
        assert cmds[stray.pid]["wchan"] not in ("", None) and cmds[stray.pid]["state"] in "SR"
        assert cmds[leader.pid]["wrapper"] and not cmds[stray.pid]["wrapper"]
        python = [p for p in answer["processes"] if p["python"]]
        assert len(python) == 1 and "sleeping_in_rank_one (<string>:3)" in stacks.process_text(python[0]), (
            python
        )
        text = stacks.render("r1", "x", [answer])
        assert "sleeping_in_rank_one" in text and "sleep 61" in text and text.splitlines()[1] == "hosts=1:"
        assert asyncio.run(dumps.run_stacks("r1", [0], None, False)) != []  # rank 0: its folder, no process
        assert asyncio.run(dumps.run_stacks("r1", None, {"hosts": 0}, False, mine={"hosts": 1})) == []
    finally:
        for proc in (leader, stray):
            os.killpg(proc.pid, 9)
            proc.wait()


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "py-spy"


@pytest.mark.parametrize("name", ["dump", "native"])
def test_py_spys_json_prints_as_its_own_text(name):
    """A real capture (tests/fixtures/py-spy: ``target.py`` dumped by py-spy 0.4.3 as text and
    as JSON, one after the other, while it slept): the JSON parsed and printed is py-spy's
    text dump without its header."""
    threads = pyspy.parse((FIXTURES / f"{name}.json").read_bytes())
    text = (FIXTURES / f"{name}.txt").read_text().splitlines()
    assert stacks.stack_lines(threads) == text[3:]
    assert [t["name"] for t in threads] == ["MainThread", "helper", "Thread-1 (pump)"]


def test_a_dump_is_bounded():
    threads = pyspy.parse((FIXTURES / "dump.json").read_bytes())
    kept, more = pyspy.trim(threads, 10)
    assert pyspy.lines(kept) == 10 and more == pyspy.lines(threads) - 10 and len(kept) == 2
    assert kept[1]["frames"] == threads[1]["frames"][:1]
    proc = {"pid": 1, "python": True, "cmd": "", "threads": kept, "more": more}
    assert stacks.process_text(proc).splitlines()[-1] == f"    … {more} more lines"
    assert pyspy.trim(threads, 100) == (threads, 0)
    assert dumps.command_text(["python", "-c", "a\nb", "x"]) == "python -c a⏎… x"
    assert asyncio.run(dumps.dump(1, False, None))[1].startswith("no py-spy")
    assert dumps.stack(b"x" * 10)[1].startswith("py-spy's output: not JSON")
    assert dumps.stack(b'{"a": 1}')[1] == "py-spy's output: a dict, not a list of threads"
    assert dumps.stack(b'[{"active": 1}]')[1] == "py-spy's output: thread 0: 'active' is int"


def test_a_real_dump_is_read_as_json(tmp_path):
    """py-spy itself on a Python process this test starts (and kills)."""
    binary = dumps.py_spy()
    assert binary is not None
    code = "import time\ndef napping():\n    time.sleep(60)\nnapping()\n"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 20
        while True:
            stack, error = asyncio.run(dumps.dump(proc.pid, False, binary))
            found = stack is not None and any(
                f["name"] == "napping" for t in stack["threads"] for f in t["frames"]
            )
            if found or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert found, (stack, error)
        assert stack["threads"][0]["status"] == "idle" and stack["more"] == 0
    finally:
        proc.kill()
        proc.wait()
    assert asyncio.run(dumps.dump(proc.pid, False, binary))[1].startswith("py-spy failed: Error:")


def test_the_wrapper_shell_is_shown_only_when_nothing_else_runs():
    shell = {
        "pid": 4,
        "state": "S",
        "wchan": "do_wait",
        "cmd": "bash -c trap …",
        "python": False,
        "wrapper": True,
    }
    sleep = {"pid": 5, "state": "S", "wchan": "hrtimer_nanosleep", "cmd": "sleep 30", "python": False}
    assert stacks.rank_text(rank(0, shell, sleep)) == "pid 5 S hrtimer_nanosleep: sleep 30"
    assert stacks.rank_text(rank(0, shell)) == "pid 4 S do_wait: bash -c trap …"
