"""The kernel side of runs (``remote/runs.py``) without kernels: the JSON index, choosing a run,
folding what the hosts say into a state, the listing's text, and ``--detach``'s flags."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from monarch_jupyter.magic_parser import ArgumentsError as ArgsError
from monarch_jupyter.remote import runs as R
from monarch_jupyter.remote.args import RemoteVerb, parse_cell, parse_line


def entry(folder: Path, run_id: str, state: str = R.RUNNING, started: float | None = None, **extra) -> dict:
    data = {
        "version": 1,
        "id": run_id,
        "path": str(folder / f"{run_id}.json"),
        "command": "echo hi\nsleep 1",
        "mode": "bash",
        "target": "mesh hosts (2 ranks)",
        "started": started or time.time(),
        "log": None,
        "host_dir": f"/tmp/x/{run_id}",
        "local": True,
        "ranks": [
            {"label": "hosts=0", "mesh": "hosts", "point": {"hosts": 0}, "rank": 0},
            {"label": "hosts=1", "mesh": "hosts", "point": {"hosts": 1}, "rank": 1},
        ],
        "state": state,
        **extra,
    }
    R.save_entry(data)
    return data


@pytest.fixture
def session(tmp_path):
    root = tmp_path / "nb"
    (root / ".monarch" / "default" / "runs").mkdir(parents=True)
    return SimpleNamespace(layout=SimpleNamespace(dir=root / ".monarch"), context="default", root=root)


def test_index_lists_newest_first_and_skips_what_it_cannot_read(session):
    folder = R.index_dir(session)
    entry(folder, "20261201-000000-bbbbbb", started=100.0)
    entry(folder, "20261201-000000-aaaaaa", started=200.0)  # same second, started later
    (folder / "20261201-000001-cccccc.json").write_text("{not json")
    (folder / "20261201-000002-dddddd.json").write_text(json.dumps({"id": "other", "ranks": []}))
    os.mkfifo(folder / "20261201-000003-eeeeee.json")  # would block a plain open
    assert [e["id"] for e in R.load_entries(session)] == ["20261201-000000-aaaaaa", "20261201-000000-bbbbbb"]


def test_find_by_any_unique_part_and_the_newest_running(session):
    folder = R.index_dir(session)
    entries = [
        entry(folder, "20261201-000002-abc123", state=R.FINISHED, started=3.0),
        entry(folder, "20261201-000001-abd456", started=2.0),
        entry(folder, "20261201-000000-fff789", started=1.0),
    ]
    assert R.find(entries, "abc123")["id"] == "20261201-000002-abc123"
    assert R.find(entries, None)["id"] == "20261201-000001-abd456"  # newest running
    with pytest.raises(R.RunsError, match="matches 2 runs"):
        R.find(entries, "ab")
    with pytest.raises(R.RunsError, match="no run 'zzz'"):
        R.find(entries, "zzz")


def test_judge_folds_host_states_into_the_entry(session):
    folder = R.index_dir(session)
    running = entry(folder, "r1")
    R._judge(
        running,
        {
            "ranks": {"hosts.0": {"state": "running"}, "hosts.1": {"state": "exited", "returncode": 0}},
            "strays": [],
        },
    )
    assert R.state_text(running) == "running (1/2 ranks)"

    done = entry(folder, "r2")
    R._judge(
        done,
        {
            "ranks": {
                "hosts.0": {"state": "exited", "returncode": 0, "ended": 5.0},
                "hosts.1": {"state": "lost"},
            },
            "strays": [],
        },
    )
    assert done["state"] == R.FINISHED and "hosts=1 (killed or lost" in R.state_text(done)
    assert json.loads(Path(done["path"]).read_text())["state"] == R.FINISHED  # recorded for the next reader

    left = entry(folder, "r3", state=R.FINISHED)
    R._judge(left, {"ranks": {}, "strays": [4242]})
    assert left["state"] == R.RUNNING and "outside its group (pid 4242)" in R.state_text(left)

    unknown = entry(folder, "r4")
    R._judge(unknown, None)
    assert R.state_text(unknown) == "running? (hosts not reachable)"


def test_listing_text(session):
    folder = R.index_dir(session)
    e = entry(
        folder, "20261201-000000-abcdef", state=R.STOPPED, started=1000.0, ended=1090.0, stop_reason="stopped"
    )
    text = R.runs_text([e], now=2000.0)
    assert "20261201-000000-abcdef  stopped" in text and "'echo hi' on mesh hosts (2 ranks)" in text
    assert "1.5 min" in text and "/tmp/x/20261201-000000-abcdef/<rank>/out|err" in text
    assert "no runs in this context yet" in R.runs_text([])


def test_prune_index_keeps_running_entries(session):
    folder = R.index_dir(session)
    for i in range(5):
        entry(folder, f"2026120{i}-000000-aaaaaa", state=R.RUNNING if i == 0 else R.FINISHED)
    R.prune_index(folder, keep=2)
    assert sorted(p.stem for p in folder.glob("*.json")) == [
        "20261200-000000-aaaaaa",
        "20261203-000000-aaaaaa",
        "20261204-000000-aaaaaa",
    ]


def test_detach_flags():
    assert parse_cell("--detach", "sleep 1").detach and parse_line("--detach sleep 1").detach
    with pytest.raises(ArgsError, match="--detach and --timeout"):
        parse_cell("--detach --timeout 3", "sleep 1")
    with pytest.raises(ArgsError, match="--detach and --save"):
        parse_cell("--detach --save x", "sleep 1")
    assert parse_line("-- runs").command == "runs"  # a command named like a verb
    assert parse_line("attach 1a2b") == RemoteVerb("attach", {"run": "1a2b"})
    assert parse_line("stop --all") == RemoteVerb("stop", {"runs": [], "all_runs": True})
