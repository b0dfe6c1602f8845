"""The kernel side of runs without kernels: the JSON index (``remote/run/index.py``) and its schema,
choosing a run, folding what the hosts say into a state, the listing's text (``remote/cell/verbs.py``),
and ``--detach``'s flags."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from monarch_jupyter.remote.cell import verbs as V  # also defines the verbs parse_line knows
from monarch_jupyter.remote.errors import RunsError
from monarch_jupyter.remote.run import index as R
from monarch_jupyter.remote.view.args import RemoteVerb, parse_cell, parse_line
from monarch_jupyter.text.parser import ArgumentsError as ArgsError


def entry(
    folder: Path, run_id: str, state: str = R.RUNNING, started: float | None = None, **extra
) -> R.RunEntry:
    """An entry as the first writers of the index wrote it (fewer properties than today's)."""
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
    path = folder / f"{run_id}.json"
    path.write_text(json.dumps(data))
    loaded = R.RunEntry.from_json(data, path)
    assert loaded is not None
    return loaded


@pytest.fixture
def session(tmp_path):
    root = tmp_path / "nb"
    (root / ".monarch" / "default" / "runs").mkdir(parents=True)
    return SimpleNamespace(layout=SimpleNamespace(dir=root / ".monarch"), context="default", root=root)


def test_index_lists_newest_first_and_skips_what_it_cannot_read(session):
    folder = R.where(session).runs_dir
    entry(folder, "20261201-000000-bbbbbb", started=100.0)
    entry(folder, "20261201-000000-aaaaaa", started=200.0)  # same second, started later
    (folder / "20261201-000001-cccccc.json").write_text("{not json")
    (folder / "20261201-000002-dddddd.json").write_text(json.dumps({"id": "other", "ranks": []}))
    os.mkfifo(folder / "20261201-000003-eeeeee.json")  # would block a plain open
    (folder / "20261201-000004-ffffff.json").write_text(
        json.dumps({"id": "20261201-000004-ffffff", "ranks": [{"label": "hosts=0"}]})  # a rank without mesh
    )
    assert [e.id for e in R.load_entries(folder)] == ["20261201-000000-aaaaaa", "20261201-000000-bbbbbb"]


def test_find_by_any_unique_part_and_the_newest_running(session):
    folder = R.where(session).runs_dir
    entries = [
        entry(folder, "20261201-000002-abc123", state=R.FINISHED, started=3.0),
        entry(folder, "20261201-000001-abd456", started=2.0),
        entry(folder, "20261201-000000-fff789", started=1.0),
    ]
    assert R.find(entries, "abc123").id == "20261201-000002-abc123"
    assert R.find(entries, None).id == "20261201-000001-abd456"  # newest running
    with pytest.raises(RunsError, match="matches 2 runs"):
        R.find(entries, "ab")
    with pytest.raises(RunsError, match="no run 'zzz'"):
        R.find(entries, "zzz")


def test_judge_folds_host_states_into_the_entry(session):
    folder = R.where(session).runs_dir
    running = entry(folder, "r1")
    R.judge(
        running,
        {
            "ranks": {"hosts.0": {"state": "running"}, "hosts.1": {"state": "exited", "returncode": 0}},
            "strays": [],
        },
    )
    assert V.state_text(running) == "running (1/2 ranks)"

    done = entry(folder, "r2")
    R.judge(
        done,
        {
            "ranks": {
                "hosts.0": {"state": "exited", "returncode": 0, "ended": 5.0},
                "hosts.1": {"state": "lost"},
            },
            "strays": [],
        },
    )
    assert done.state == R.FINISHED and "hosts=1 (killed or lost" in V.state_text(done)
    assert json.loads(Path(done.path).read_text())["state"] == R.FINISHED  # recorded for the next reader

    left = entry(folder, "r3", state=R.FINISHED)
    R.judge(left, {"ranks": {}, "strays": [4242]})
    assert left.is_running and "outside its group (pid 4242)" in V.state_text(left)
    assert json.loads(Path(left.path).read_text())["state"] == R.FINISHED  # what it ran has ended

    unknown = entry(folder, "r4")
    R.judge(unknown, None)
    assert V.state_text(unknown) == "running? (hosts not reachable)"


def test_listing_text(session):
    folder = R.where(session).runs_dir
    e = entry(
        folder, "20261201-000000-abcdef", state=R.STOPPED, started=1000.0, ended=1090.0, stop_reason="stopped"
    )
    text = V.runs_text([e], now=2000.0)
    assert "20261201-000000-abcdef  stopped" in text and "'echo hi' on mesh hosts (2 ranks)" in text
    assert "1.5 min" in text and "/tmp/x/20261201-000000-abcdef/<rank>/out|err" in text
    assert "no runs in this context yet" in V.runs_text([])


def test_prune_index_keeps_running_entries(session):
    folder = R.where(session).runs_dir
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


# ── the entry against its schema (what the server and other kernels read) ──
jsonschema = pytest.importorskip("jsonschema")


def _validator():
    from monarch_jupyter.schema import RUN_ENTRY_PATH

    schema = json.loads(RUN_ENTRY_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema, jsonschema.Draft202012Validator(schema)


def _new(session, run_id="20261201-000000-abcdef", **args) -> R.RunEntry:
    from monarch_jupyter.remote.view.args import RemoteArgs
    from monarch_jupyter.remote.view.model import RankState

    ranks = [RankState(label=f"hosts={i}", mesh="hosts", point={"hosts": i}, rank=i) for i in range(2)]
    here = R.where(session)
    return R.new_entry(
        here,
        run_id,
        RemoteArgs(command="echo hi", **args),
        "mesh hosts (2 ranks)",
        ranks,
        local=True,
        apply_id="apply-1",
        log_path=here.runs_dir / f"{run_id}.log",
    )


def test_the_entry_fields_are_the_schemas_properties():
    """A field added only in Python (or only in the schema) fails here."""
    schema, _ = _validator()
    assert R.saved_fields() == set(schema["properties"]) == set(schema["required"])
    assert schema["additionalProperties"] is False
    selection = schema["$defs"]["selection"]
    assert {f.name for f in dataclasses.fields(R.Selection)} == set(selection["properties"])
    assert {f.name for f in dataclasses.fields(R.RankRef)} == set(schema["$defs"]["rank"]["properties"])


def test_every_entry_we_write_matches_the_schema_and_reads_back(session):
    _, validator = _validator()
    written = []
    running = _new(session, point=(("hosts", 1),), per_host=(("gpu", 2),))
    running.save()
    written.append(running)
    ended = _new(session, "20261201-000001-abcdef", ranks=(0, 1), mesh="hosts")
    ended.save()
    ended.end_with({0: (0, None), 1: (3, None)}, None, None)
    written.append(ended)
    stopped = _new(session, "20261201-000002-abcdef", all_meshes=True)
    stopped.end(R.STOPPED, stop_reason="stopped")
    written.append(stopped)
    judged = _new(session, "20261201-000003-abcdef")
    R.judge(judged, {"ranks": {"hosts.0": {"state": "exited", "returncode": 0, "ended": 5.0}}, "strays": [7]})
    written.append(judged)
    for entry in written:
        saved = json.loads(Path(entry.path).read_text())
        validator.validate(saved)
        assert list(saved) == list(entry.to_json())
        back = R.RunEntry.from_json(saved, Path(entry.path))
        assert back == entry and back.seen is None  # what the hosts said is not saved
    assert ended.failed == ["hosts=1 (rc 3)"] and ended.state == R.FINISHED
    assert (
        judged.failed == ["hosts=1 (no folder on its host: pruned or never started)"] and judged.ended == 5.0
    )
    assert running.to_args().point == (("hosts", 1),) and running.to_args().per_host == (("gpu", 2),)
    bad = running.to_json() | {"new_field": 1}  # the schema takes no property it does not name
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)


def test_entries_of_older_writers_still_load(session):
    """Properties an entry lacks take their defaults, unknown ones are ignored, wrong types too."""
    folder = R.where(session).runs_dir
    old = entry(folder, "20261201-000000-oooooo", started=5.0, extra_key={"x": 1}, kernel_pid="not a pid")
    assert old.context is None and old.plan == R.Selection() and old.failed == [] and old.ended is None
    assert old.kernel_pid is None and old.ranks[1] == R.RankRef("hosts=1", "hosts", {"hosts": 1}, 1)
    assert [e.id for e in R.load_entries(folder)] == [old.id]
    _, validator = _validator()
    old.save()  # rewritten whole: valid from now on
    validator.validate(json.loads(Path(old.path).read_text()))


def test_the_server_lists_the_running_entries_we_write(session):
    from monarch_jupyter._server.contexts import running_runs

    running = _new(session)
    running.save()
    done = _new(session, "20261201-000001-abcdef")
    done.end_with({0: (0, None), 1: (0, None)}, None, None)
    listed = running_runs(str(session.layout.dir / "default"))
    assert [r["id"] for r in listed] == [running.id]
    assert listed[0]["command"] == "echo hi" and listed[0]["target"] == "mesh hosts (2 ranks)"
    assert listed[0]["started"] == running.started and listed[0]["detached"] is False


def test_the_server_reads_entry_properties_by_the_schemas_names():
    """A property renamed in the schema (and RunEntry) but not in the server fails here."""
    import re

    from monarch_jupyter._server import contexts

    schema, _ = _validator()
    source = Path(contexts.__file__).read_text()
    read = set(re.findall(r"""\bentry(?:\.get\(|\[)["'](\w+)["']""", source))
    assert {"id", "state", "command", "target", "started", "detached", "local", "host_dir", "ranks"} <= read
    assert read <= set(schema["properties"])
    rank_read = set(re.findall(r"""\brank\.get\(["'](\w+)["']""", source))
    assert rank_read == {"mesh", "rank"} and rank_read <= set(schema["$defs"]["rank"]["properties"])


def test_an_end_written_later_waits_for_the_flush_and_a_reader_here_flushes_it_first(session):
    """A run's end is written after its cell (the drive's loop flushes ``LATER`` s on): until
    then the file still says running, but any listing in this process sees the end."""
    folder = R.where(session).runs_dir
    run = _new(session)
    run.save()
    run.end_with({0: (0, None), 1: (2, None)}, None, None, later=True)
    assert json.loads(Path(run.path).read_text())["state"] == R.RUNNING  # not written yet
    [listed] = R.load_entries(folder)  # the reader flushes first
    assert listed.state == R.FINISHED and listed.failed == ["hosts=1 (rc 2)"]
    assert json.loads(Path(run.path).read_text())["state"] == R.FINISHED
    assert not R._pending
    R.flush_pending()  # nothing left: a second flush writes nothing
    assert json.loads(Path(run.path).read_text())["state"] == R.FINISHED
