"""The %%remote wire protocol and the client's reading of it, without workers; and the fault
counter the client uses to notice a dead worker sooner."""

from __future__ import annotations

import pickle
import queue
import time

import cloudpickle
import pytest

from monarch_jupyter.remote.run.drive import Drive, Plan, RunHandle, Target
from monarch_jupyter.remote.run.spool import Spool, read_log
from monarch_jupyter.remote.view import model
from monarch_jupyter.remote.view.liveness import FAULT_SILENT_AFTER, SILENT_AFTER
from monarch_jupyter.remote.view.model import Exited, Output, RankState, Started
from monarch_jupyter.remote.wire import protocol
from monarch_jupyter.remote.wire.protocol import Chunk, Data, Exit, Heartbeat, RunSpec
from monarch_jupyter.runtime import faults as _faults

MESSAGES = [
    RunSpec("bash", "echo hi", {"A": "1"}, None, "/tmp", "out/$SUBDIR"),
    Data("run", "hosts", 1, 4242, [Chunk("out", "a\nb", 1), Chunk("err", "e\n", 1)]),
    Heartbeat("run", "hosts", 1, 4242),
    Exit("run", "hosts", 1, 4242, [Chunk("out", "c\n", 1)], 3, 0.25, None),
    Exit("run", "hosts", 0, None, [], None, 0.0, "could not start: no such directory"),
    Exit("run", "hosts", 1, 4242, [], -2, 1.5, None, "%job kill (kernel pid 42)"),
]


@pytest.fixture
def by_value():
    """The protocol module pickled by value, as in a kernel that started remote actors
    (``engines.send_by_value``)."""
    cloudpickle.register_pickle_by_value(protocol)
    yield
    cloudpickle.unregister_pickle_by_value(protocol)


def _to_wire(message):
    return protocol.spec_to_wire(message) if type(message) is RunSpec else protocol.encode(message)


def _from_wire(wire, kind):
    return protocol.spec_from_wire(wire) if kind is RunSpec else protocol.decode(wire)


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
def test_messages_cross_the_wire_whole_and_keep_their_types(message, dumps):
    back = _from_wire(pickle.loads(dumps(_to_wire(message))), type(message))
    assert back == message and type(back) is type(message)
    for chunk in getattr(back, "chunks", []):
        assert type(chunk) is Chunk and chunk.text


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_the_wire_carries_no_class_definition_when_the_module_travels_by_value(message, by_value):
    wire = cloudpickle.dumps(_to_wire(message))
    assert type(message).__name__.encode() not in wire and b"Chunk" not in wire
    assert len(wire) <= len(pickle.dumps(tuple(message))) + 40  # the size of plain tuples
    # what encoding avoids: the NamedTuple itself would carry its class, every message
    assert len(cloudpickle.dumps(message)) > len(wire) + 500


def test_streams_are_the_models():
    assert (protocol.OUT, protocol.ERR) == (model.OUT, model.ERR)  # the runner passes them through


def _drive(tmp_path):
    ranks = [RankState(label=f"hosts={i}", mesh="hosts", point={"hosts": i}, rank=i) for i in range(2)]
    plan = Plan(ranks, [Target("hosts", None, {0: 0, 1: 1})], "mesh hosts (2 ranks)")
    spec = RunSpec("bash", "x", {}, None, None, None)
    drive = Drive(
        "run",
        plan,
        queue.SimpleQueue(),
        RunHandle(None),
        forget=lambda mesh: None,
        spec=spec,
        log_path=tmp_path / "r.log",
    )
    drive.spool = Spool(drive.log_path, [r.label for r in ranks])
    return drive, drive.spool


def _events(sink):
    out = []
    while not sink.empty():
        out.append(sink.get_nowait())
    return out


def test_the_drive_reads_messages_by_name(tmp_path):
    drive, spool = _drive(tmp_path)
    drive.watch.heard = {0: 0.0, 1: 0.0}
    remaining = drive.remaining
    assert remaining == {0, 1}
    drive._handle(Heartbeat("run", "hosts", 1, 77))
    drive._handle(Data("run", "hosts", 1, 77, [Chunk("out", "a\nb", 1), Chunk("err", "e\n", 1)]))
    drive._handle(Data("other-run", "hosts", 0, 5, [Chunk("out", "not ours\n", 1)]))
    drive._handle(Data("run", "aux", 0, 5, [Chunk("out", "not a target\n", 1)]))
    drive._handle(Exit("run", "hosts", 1, 77, [Chunk("out", "c\n", 1)], 3, 0.5, None))
    drive._handle(Exit("run", "hosts", 0, None, [], None, 0.1, "could not start: boom"))
    drive._handle(Data("run", "hosts", 1, 77, [Chunk("out", "after the exit\n", 1)]))
    assert _events(drive.sink) == [
        Started(1, 77),
        Output(1, model.OUT, "a\nb", 1),
        Output(1, model.ERR, "e\n", 1),
        Output(1, model.OUT, "c\n", 1),
        Exited(1, 3, 0.5, None),
        Exited(0, None, 0.1, "could not start: boom"),
    ]
    assert remaining == set() and drive.watch.heard == {}  # ended ranks are watched no more
    spool.close()
    log = read_log(drive.log_path)
    assert log["hosts=1"] == ["a", "bc"] and log["hosts=1:err"] == ["e"]
    assert any("could not start: boom" in note for note in log["#"])


# ── faults ──
class _Failure:
    def __init__(self, text):
        self.text = text

    def report(self):
        return self.text + "\nmore detail"


def test_a_fault_is_noticed_after_more_than_the_kept_number(monkeypatch):
    monkeypatch.setattr(_faults, "faults", [])
    monkeypatch.setattr(_faults, "count", 0)
    for i in range(_faults.KEEP + 10):
        _faults.record(_Failure(f"proc {i} died"))
    assert len(_faults.faults) == _faults.KEEP and _faults.faults[-1][1] == f"proc {_faults.KEEP + 9} died"
    assert _faults.count == _faults.KEEP + 10

    drive = Drive("run", Plan([], [], ""), queue.SimpleQueue(), RunHandle(None), forget=lambda mesh: None)
    assert drive.faults_before == _faults.count  # a run starts with 60 faults already recorded
    drive._check_ranks(time.monotonic())
    assert drive.watch.threshold() == SILENT_AFTER
    _faults.record(_Failure("proc 60 died"))  # the list stays at KEEP entries, the count moves on
    assert len(_faults.faults) == _faults.KEEP
    drive._check_ranks(time.monotonic())
    assert drive.watch.threshold() == FAULT_SILENT_AFTER  # the silent ranks are probed sooner


def test_a_fault_whose_report_fails_is_still_recorded(monkeypatch):
    monkeypatch.setattr(_faults, "faults", [])

    class Broken:
        def report(self):
            raise RuntimeError("no report")

        def __str__(self):
            return "broken failure"

    _faults.record(Broken())
    assert _faults.faults[-1][1] == "broken failure"


def test_torch_env_is_monarchs_spmd_rule():
    """As monarch.spmd.SPMDActor: the last dim is the local one, ranks are row-major."""
    from monarch_jupyter.remote.wire.protocol import torch_env

    sizes = {"hosts": 2, "gpus": 2}
    seen = [torch_env({"hosts": h, "gpus": g}, sizes, h * 2 + g) for h in range(2) for g in range(2)]
    assert [(e["RANK"], e["LOCAL_RANK"], e["GROUP_RANK"]) for e in seen] == [
        ("0", "0", "0"),
        ("1", "1", "0"),
        ("2", "0", "1"),
        ("3", "1", "1"),
    ]
    assert {(e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"], e["GROUP_WORLD_SIZE"]) for e in seen} == {
        ("4", "2", "2")
    }
    only_hosts = torch_env({"hosts": 2}, {"hosts": 3}, 2)  # no --per-host: hosts is the last dim
    assert (only_hosts["LOCAL_RANK"], only_hosts["LOCAL_WORLD_SIZE"], only_hosts["GROUP_RANK"]) == (
        "2",
        "3",
        "0",
    )
