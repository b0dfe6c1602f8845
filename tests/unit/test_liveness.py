"""Lost only on evidence, silent otherwise: the pure decision (:mod:`monarch_jupyter.remote.view.liveness`)
and the drive acting on it, with fake actors and a fake /proc (no workers)."""

from __future__ import annotations

import asyncio
import queue
import time

from monarch_jupyter.remote.run import drive as drive_mod
from monarch_jupyter.remote.run.drive import Drive, Plan, RunHandle, Target
from monarch_jupyter.remote.run.spool import Spool, read_log
from monarch_jupyter.remote.view import liveness
from monarch_jupyter.remote.view.liveness import (
    ALIVE,
    FAULT_SILENT_AFTER,
    GONE,
    SILENCE_CAP,
    SILENT_AFTER,
    STOPPED,
    UNKNOWN,
    Evidence,
    SilenceWatch,
    lost_reason,
    probe_failure,
    silent_note,
)
from monarch_jupyter.remote.view.model import Lost, RankState, RunState, Silent
from monarch_jupyter.remote.view.render import TextRenderer
from monarch_jupyter.remote.wire.protocol import Heartbeat, RunSpec
from monarch_jupyter.runtime import faults as _faults


# ── the pure decision ──
def test_only_a_gone_worker_or_a_failed_probe_loses_a_rank():
    assert lost_reason(Evidence(GONE, 42)) == "worker process 42 died"
    assert lost_reason(Evidence(UNKNOWN, None, "SupervisionError: proc died")) == (
        "worker failed a probe (SupervisionError: proc died)"
    )
    for worker in (ALIVE, STOPPED, UNKNOWN):  # however long it was silent
        assert lost_reason(Evidence(worker, 42)) is None
    assert lost_reason(Evidence(UNKNOWN, None, None, probing=True)) is None


def test_a_probe_that_only_timed_out_proves_nothing():
    assert probe_failure("TimeoutError", "") is None
    assert probe_failure("SomeMonarchTimeout", "no answer in 30 s") is None
    assert probe_failure("SupervisionError", "proc mesh remote_hosts died\ntraceback…") == (
        "SupervisionError: proc mesh remote_hosts died"
    )
    assert probe_failure("ActorError", "") == "ActorError"


def test_the_silence_note_says_what_the_worker_is_doing():
    assert silent_note(Evidence(ALIVE, 7)) == "worker alive"
    assert silent_note(Evidence(STOPPED, 7)) == "worker stopped (SIGSTOP): kill -CONT 7"
    assert silent_note(Evidence(UNKNOWN, None, probing=True)) == "probing the worker"
    assert silent_note(Evidence(UNKNOWN)) == "worker answers probes"


def test_the_threshold_follows_the_longest_silence_a_rank_came_back_from():
    watch = SilenceWatch([0, 1], now=0.0)
    assert watch.threshold() == SILENT_AFTER
    watch.hear(0, 4.0)  # rank 0 back after 4 s: a starved machine delays live ranks
    assert watch.longest_gap == 4.0 and watch.threshold() == 12.0
    watch.hear(0, 1004.0)
    assert watch.threshold() == SILENCE_CAP
    watch.fault = True
    assert watch.threshold() == FAULT_SILENT_AFTER


def test_a_silent_rank_is_reported_once_then_each_time_its_silence_doubles():
    watch = SilenceWatch([0, 1], now=0.0)
    assert watch.due(4.0) == {}
    watch.hear(1, 1.0)
    watch.hear(1, 2.0)
    assert watch.due(6.0) == {0: 6.0}  # 1 heard at 2 s: silent for 4 s only
    assert watch.due(7.0) == {1: 5.0}
    assert watch.due(11.0) == {}
    assert watch.due(12.0) == {0: 12.0, 1: 10.0}  # both twice as silent as when last said
    assert watch.hear(0, 13.0) == 13.0  # back: the caller notes how long it was silent
    assert watch.hear(0, 13.5) is None  # not reported since
    watch.drop(1)
    assert 1 not in watch.silent(100.0)


def test_silent_for_reads_as_seconds_then_minutes():
    assert liveness.silent_for(12.4) == "12 s"
    assert liveness.silent_for(600) == "10 min"


# ── the drive acting on it ──
class _Call:
    def __init__(self, outcome):
        self.outcome = outcome

    async def call(self):
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        if self.outcome == "hang":
            await asyncio.sleep(3600)
        return self.outcome


class _Actors:
    """An actor mesh whose ``ping`` answers, raises or hangs per rank (by its hosts coordinate)."""

    def __init__(self, outcomes, point=None):
        self.outcomes = outcomes
        self.point = point
        self.sizes = {"hosts": len(outcomes)} if point is None else {}

    def slice(self, **point):
        return _Actors(self.outcomes, point)

    @property
    def ping(self):
        return _Call(self.outcomes[self.point["hosts"]])


def _drive(tmp_path, outcomes, pids=None, procs=None):
    ranks = [
        RankState(label=f"hosts={i}", mesh="hosts", point={"hosts": i}, rank=i) for i in range(len(outcomes))
    ]
    targets = [Target("hosts", _Actors(outcomes), {i: i for i in range(len(outcomes))})]
    plan = Plan(ranks, targets, "mesh hosts", dict(pids or {}), proc_pids=dict(procs or {}))
    drive = Drive(
        "run",
        plan,
        queue.SimpleQueue(),
        RunHandle(None),
        forget=lambda mesh: None,
        spec=RunSpec("bash", "x", {}, None, None, None),
        log_path=tmp_path / "r.log",
    )
    drive.spool = Spool(drive.log_path, [r.label for r in ranks])
    return drive


def _fake_proc(monkeypatch, state_of):
    """/proc as the drive reads it: each pid's state letter (None: no such process)."""
    monkeypatch.setattr(
        drive_mod._procfs,
        "stat_fields",
        lambda pid: None if state_of(pid) is None else [state_of(pid), "1", "1"],
    )


def _events(sink):
    out = []
    while not sink.empty():
        out.append(sink.get_nowait())
    return out


def test_a_local_rank_silent_for_minutes_is_reported_not_lost_and_a_dead_worker_is(tmp_path, monkeypatch):
    """Local workers: /proc is the evidence. A silent rank whose worker runs (or is stopped) is
    named with its silence and nothing is killed; the rank whose worker died is lost."""
    states = {100: "alive", 101: "stopped", 102: "alive"}
    _fake_proc(monkeypatch, lambda pid: {"alive": "S", "stopped": "T"}.get(states[pid]))
    killed = []
    monkeypatch.setattr(drive_mod.os, "killpg", lambda pgid, sig: killed.append(pgid))
    monkeypatch.setattr(drive_mod, "PROBE_EVERY", 1e9)  # no probe: /proc decides here
    drive = _drive(tmp_path, [1, 1, 1], {0: 100, 1: 101, 2: 102})
    drive.pgids = {0: 500, 1: 501, 2: 502}
    now = time.monotonic()
    drive.watch.heard = {0: now - 300.0, 1: now - 12.0, 2: now}
    drive._check_ranks(now)
    assert drive.remaining == {0, 1, 2} and killed == []
    silent = [e for e in _events(drive.sink) if isinstance(e, Silent)]
    assert [e.line for e in silent] == [
        "hosts=0 silent for 5 min (worker alive)",
        "hosts=1 silent for 12 s (worker stopped (SIGSTOP): kill -CONT 101)",
    ]
    states[102] = "gone"
    drive._check_ranks(now + 1.0)
    assert drive.remaining == {0, 1} and killed == [502]
    lost = [e for e in _events(drive.sink) if isinstance(e, Lost)]
    assert [(e.index, e.message) for e in lost] == [(2, "worker process 102 died")]
    drive._handle(Heartbeat("run", "hosts", 1, 501))  # continued: heard again
    drive.spool.close()
    notes = read_log(drive.log_path)["#"]
    assert "hosts=0 silent for 5 min (worker alive)" in notes
    assert any(n.startswith("hosts=1: heard again after 1") for n in notes), notes


def test_remote_ranks_are_lost_only_when_their_probe_fails(tmp_path, monkeypatch):
    """No /proc to judge: a silent rank's actor is pinged. One that answers, or does not answer
    at all, is silent; one whose ping raised (Monarch's supervision) is lost."""
    monkeypatch.setattr(_faults, "count", 0)
    failure = RuntimeError("SupervisionError: actor remote_hosts[1] died")
    drive = _drive(tmp_path, [1, failure, "hang"])

    async def go():
        now = time.monotonic()
        drive.watch.heard = dict.fromkeys(range(3), now - 8.0)
        drive._check_ranks(now)
        assert drive.probe is not None
        await asyncio.sleep(0.05)  # the probe: rank 0 answers, 1 raises, 2 hangs
        monkeypatch.setattr(drive_mod, "PROBE_WAIT", 0.05)
        drive._check_ranks(time.monotonic())
        assert drive.probe is not None  # rank 2's ping is still out
        await asyncio.wait_for(drive.probe, 5)
        drive._check_ranks(time.monotonic())

    monkeypatch.setattr(drive_mod, "PROBE_WAIT", 0.3)
    asyncio.run(go())
    assert drive.remaining == {0, 2}
    lost = [e for e in _events(drive.sink) if isinstance(e, Lost)]
    assert [e.index for e in lost] == [1] and "failed a probe (RuntimeError: SupervisionError" in lost[
        0
    ].message
    drive.spool.close()


def test_the_text_view_writes_the_silence_line_once():
    state = RunState(
        "x", "bash", "mesh hosts", [RankState(label="hosts=7", mesh="hosts", point={"hosts": 7}, rank=7)], 0.0
    )
    renderer = TextRenderer(state)
    state.apply(Silent((0,), 12.0, "hosts=7 silent for 12 s (worker alive)"))
    text = renderer.flush(10.0, force=True)
    assert text == "hosts=7 silent for 12 s (worker alive)\n"
    assert renderer.flush(20.0, force=True) == ""


def test_a_local_rank_whose_proc_died_is_lost_though_its_host_worker_runs(tmp_path, monkeypatch):
    """The rank's actor runs in a proc of its own under the host's worker: that proc's death
    is evidence too, and the line names its pid."""
    gone = {201}
    _fake_proc(monkeypatch, lambda pid: None if pid in gone else "S")
    monkeypatch.setattr(drive_mod.os, "killpg", lambda pgid, sig: None)
    drive = _drive(tmp_path, [1, 1], {0: 100, 1: 100}, {0: 200, 1: 201})
    drive._check_ranks(time.monotonic() + 1.0)
    assert drive.remaining == {0}
    lost = [e for e in _events(drive.sink) if isinstance(e, Lost)]
    assert [(e.index, e.message) for e in lost] == [(1, "worker process 201 died")]
    drive.spool.close()


def test_ranks_falling_silent_within_a_second_share_one_line(tmp_path, monkeypatch):
    _fake_proc(monkeypatch, lambda pid: "R")
    monkeypatch.setattr(drive_mod, "PROBE_EVERY", 1e9)
    drive = _drive(tmp_path, [1, 1, 1], dict.fromkeys(range(3), 100))
    now = time.monotonic()
    drive.watch.heard = {0: now - 6.0, 1: now - 5.5, 2: now}
    drive._check_ranks(now)
    drive.watch.heard[2] = now - 4.7  # silent past 5 s 0.5 s later: waits for the next line
    drive._check_ranks(now + 0.5)
    drive._check_ranks(now + 1.1)
    lines = [e.line for e in _events(drive.sink) if isinstance(e, Silent)]
    assert lines == ["hosts=[0-1] silent for 6 s (worker alive)", "hosts=2 silent for 6 s (worker alive)"]
    drive.spool.close()
