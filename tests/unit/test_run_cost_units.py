"""The short paths of a run's per-message and per-run work give what the general ones gave:
``protocol.decode``'s Data, the run log's whole-line writes, ``RunState.apply`` of an Output,
and a runs index entry saved into a folder that is gone."""

from __future__ import annotations

import stat
import time
from types import SimpleNamespace

from monarch_jupyter.remote.run import index as R
from monarch_jupyter.remote.run.spool import HEAD_BYTES, Spool, read_log
from monarch_jupyter.remote.view.args import RemoteArgs
from monarch_jupyter.remote.view.model import Exited, Output, RankState, RunState, Started
from monarch_jupyter.remote.wire.protocol import (
    ERR,
    OUT,
    Chunk,
    Data,
    Exit,
    Heartbeat,
    decode,
    encode,
)


def test_decode_gives_the_messages_encode_was_given():
    messages = [
        Data("r1", "hosts", 3, 42, [Chunk(OUT, "a\nb\n", 2), Chunk(ERR, "oops", 0)]),
        Data("r1", "hosts", 0, None, []),
        Heartbeat("r1", "hosts", 1, 7),
        Exit("r1", "hosts", 1, 7, [Chunk(OUT, "end\n", 1)], 3, 0.5, None, "me"),
    ]
    for message in messages:
        back = decode(encode(message))
        assert type(back) is type(message)
        assert back == message
        for chunk in getattr(back, "chunks", []):
            assert type(chunk) is Chunk
            assert (chunk.stream, chunk.text, chunk.newlines) == tuple(chunk)


def _write_all(path, writes, head=HEAD_BYTES):
    spool = Spool(path, ["hosts=0", "hosts=1"], head=head)
    for index, stream, text in writes:
        spool.write(index, stream, text)
    spool.close()
    return path.read_bytes()


def test_whole_lines_are_logged_as_every_other_write_is(tmp_path):
    """Whole-line chunks (the short path) between partial lines, stderr, a rank's line that looks
    like a header and a rank past its head: every line in order, framed and quoted as before."""
    writes = [
        (0, OUT, "1\n2\n"),
        (1, OUT, "x\n"),
        (0, OUT, "par"),
        (0, OUT, "tial\n3\n"),
        (1, ERR, "warn\n"),
        (1, OUT, "==> [hosts=0] <==\n"),
        (0, OUT, "4\n"),
        (0, OUT, b"5\n"),
    ]
    data = _write_all(tmp_path / "a.log", writes)
    assert data.count(b"\\==> [hosts=0] <==\n") == 1  # the forged header, quoted
    log = read_log(tmp_path / "a.log")
    assert log["hosts=0"] == ["1", "2", "partial", "3", "4", "5"]
    assert log["hosts=1"] == ["x", "==> [hosts=0] <=="]
    assert log["hosts=1:err"] == ["warn"]
    # past the head: the short path hands over to the tail, which the close writes after a note
    data = _write_all(tmp_path / "b.log", [(0, OUT, f"{n}\n") for n in range(100)], head=32)
    log = read_log(tmp_path / "b.log")
    assert log["hosts=0"][0] == "0"
    assert log["hosts=0"][-1] == "99"
    assert any("skipped here" in note for note in log["#"])


def test_an_output_moves_no_version_and_completes_its_lines():
    ranks = [RankState(label=f"hosts={i}", mesh="hosts", point={"hosts": i}, rank=i) for i in range(2)]
    state = RunState("c", "bash", "mesh hosts (2 ranks)", ranks, started=time.time())
    seen = []
    state.observers.append(SimpleNamespace(on_event=lambda s, e: seen.append(e)))
    state.apply(Started(0, 10))
    version = state.version
    fed = state.apply(Output(0, OUT, "a\nb", 1))
    assert state.version == version  # output of a running rank: no status moved
    assert [f.last(5) for f in fed] == [["a"]]
    assert ranks[0].pending[OUT] == "b"
    state.apply(Output(1, ERR, "e\n"))  # a pending rank's first output starts it: the version moves
    assert state.version == version + 1
    assert ranks[1].status == "running"
    state.apply(Exited(0, 0, 0.1))
    assert ranks[0].status == "ok"
    assert list(ranks[0].lines) == [(OUT, "a"), (OUT, "b")]
    assert [type(e).__name__ for e in seen] == ["Started", "Output", "Output", "Exited"]


def test_an_entry_saved_into_a_folder_that_is_gone_makes_it_private(tmp_path):
    root = tmp_path / "nb"
    session = SimpleNamespace(layout=SimpleNamespace(dir=root / ".monarch"), context="default", root=root)
    here = R.where(session)
    ranks = [RankState(label="hosts=0", mesh="hosts", point={"hosts": 0}, rank=0)]
    entry = R.new_entry(
        here,
        "20261202-000000-abcdef",
        RemoteArgs(command="true"),
        "mesh hosts (1 rank)",
        ranks,
        local=True,
        apply_id=None,
        log_path=here.runs_dir / "20261202-000000-abcdef.log",
    )
    assert not here.runs_dir.exists()
    entry.save()
    assert [e.id for e in R.load_entries(here.runs_dir)] == ["20261202-000000-abcdef"]
    assert stat.S_IMODE(here.runs_dir.stat().st_mode) == 0o700
    entry.end(R.FINISHED)  # the folder is there now: written straight away
    assert R.load_entries(here.runs_dir)[0].state == R.FINISHED


def test_write_atomic_skips_a_dead_writers_temporary_file_and_leaves_none(tmp_path):
    import os

    from monarch_jupyter.system import files as _files

    target = tmp_path / "entry.json"
    count = next(_files._TMP_COUNT) + 1
    stale = tmp_path / f".entry.json.{os.getpid()}-{count}.tmp"  # the name the next write would take
    stale.write_bytes(b"left by a writer that died")
    _files.write_atomic(target, b"{}")
    assert target.read_bytes() == b"{}"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    _files.write_atomic(target, b"[]", mode=0o644)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == [stale.name, "entry.json"]
    assert stale.read_bytes() == b"left by a writer that died"
