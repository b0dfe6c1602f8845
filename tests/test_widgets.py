"""The job widget and the run grid without a browser: view data, state transitions, bundles."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from monarch_jupyter import formatting
from monarch_jupyter.errors import NoJobError
from monarch_jupyter.session import NO_JOB, RUNNING, WORKERS_DEAD, JobSession, JobStatus, MeshStatus
from monarch_jupyter.widgets.job import JobWidget, details_html, header_html, job_view

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def running(context: str = "default", hosts: int = 2, live: int = 2, **extra) -> JobStatus:
    return JobStatus(
        context=context, state=RUNNING, job_class="ProcessJob",
        apply_id="46cedd42-7289-40bd-aaee-9a152d09104d", spec="monarch_jupyter.local_jobs.hosts_2",
        meshes=[MeshStatus("hosts", hosts, live)], applied_at=1000.0, attached=True,
        cache_path=".monarch/default/state.pkl", **extra,
    )


class FakeSession:
    """What JobWidget uses of JobSession: root, status, kill, add_listener."""

    def __init__(self, root: Path, status: JobStatus) -> None:
        self.root = root
        self.current = status
        self.listeners = []
        self.kills = []

    def add_listener(self, fn):
        self.listeners.append(fn)
        return lambda: self.listeners.remove(fn) if fn in self.listeners else None

    def publish(self, status: JobStatus) -> None:
        for fn in list(self.listeners):
            fn(status)

    def status(self, context=None):
        self.publish(self.current)
        return self.current

    def kill(self, context=None):
        if self.current.state == NO_JOB:
            raise NoJobError(f"no job to kill in context '{context}'")
        before, self.current = self.current, JobStatus(context=context, state=NO_JOB, spec=self.current.spec)
        self.kills.append(context)
        self.publish(self.current)
        return before


# ── pure view data ──────────────────────────────────────────────────────
def test_view_of_a_running_job():
    view = job_view(running(urls={"telemetry": "http://127.0.0.1:9000/t", "dashboard": None,
                                  "admin": "tcp://10.0.0.1:26600"}), now=1042.0)
    assert (view.state, view.context, view.job_class) == (RUNNING, "default", "ProcessJob")
    assert view.colour == "#1a7f37" and view.can_kill
    assert [(m.name, m.hosts, m.live_workers) for m in view.meshes] == [("hosts", "2", "2")]
    assert view.total_hosts == 2
    assert view.applied == "42 s ago"
    assert view.links == [("telemetry", "http://127.0.0.1:9000/t")]  # only http(s) become links
    assert view.other_urls == [("admin", "tcp://10.0.0.1:26600")]
    assert view.hint == ""
    body = details_html(view)
    assert "<a href='http://127.0.0.1:9000/t'" in body and "tcp://10.0.0.1:26600" in body
    assert "class='monarch-job-mesh' data-mesh='hosts'" in body
    assert 'data-state="running"' in header_html(view)


def test_view_of_no_job_and_dead_workers():
    none = job_view(JobStatus(context="exp", state=NO_JOB))
    assert not none.can_kill and none.meshes == [] and "%job apply --local hosts=2" in none.hint
    assert "monarch-job-apply-id" not in details_html(none)  # no class/apply id rows
    dead = job_view(JobStatus(context="exp", state=WORKERS_DEAD, job_class="ProcessJob",
                              meshes=[MeshStatus("hosts", 2, 0), MeshStatus("gpus", None, None)]))
    assert dead.can_kill and dead.colour == "#cf222e" and "Kill clears the cache" in dead.hint
    assert [(m.hosts, m.live_workers) for m in dead.meshes] == [("2", "0"), ("?", "?")]
    assert dead.total_hosts == 2


def test_view_escapes_html():
    view = job_view(JobStatus(context="x", state=RUNNING, job_class="<b>", spec="<script>"))
    assert "<script>" not in details_html(view) and "&lt;script&gt;" in details_html(view)


# ── widget: transitions and bundle ───────────────────────────────────────
def test_widget_follows_published_statuses(tmp_path):
    session = FakeSession(tmp_path, running())
    widget = JobWidget(session, session.current)
    try:
        assert widget.view.state == RUNNING and not widget._kill.disabled
        session.publish(running(context="other", hosts=8))  # another context: ignored
        assert widget.view.total_hosts == 2
        session.publish(running(hosts=3, live=1))  # e.g. %job apply from another cell
        assert (widget.view.meshes[0].hosts, widget.view.meshes[0].live_workers) == ("3", "1")
        assert 'data-state="running"' in widget._head.value
        session.publish(JobStatus(context="default", state=NO_JOB))  # %job kill elsewhere
        assert widget.view.state == NO_JOB and widget._kill.disabled
        assert 'data-state="no job"' in widget._head.value
    finally:
        widget.close()
    assert session.listeners == []  # closing unsubscribes


def test_kill_asks_for_confirmation(tmp_path):
    session = FakeSession(tmp_path, running())
    widget = JobWidget(session, session.current)
    try:
        widget._kill.click()
        assert widget._confirm_row.layout.display is None and widget._kill.layout.display == "none"
        widget._cancel.click()
        assert session.kills == [] and widget._confirm_row.layout.display == "none"
        assert widget.view.state == RUNNING
        widget._kill.click()
        widget._confirm.click()
        assert session.kills == ["default"]
        assert widget.view.state == NO_JOB and widget._kill.disabled
        assert "killed the job of context 'default'" in widget._message.value
        widget._refresh.click()
        assert widget.view.state == NO_JOB and widget._message.value == ""
    finally:
        widget.close()


def test_kill_error_is_shown_not_raised(tmp_path):
    session = FakeSession(tmp_path, running())
    widget = JobWidget(session, session.current)
    session.current = JobStatus(context="default", state=NO_JOB)  # killed behind the widget's back
    widget._kill.click()
    widget._confirm.click()
    assert "no job to kill" in widget._message.value
    assert widget.view.state == NO_JOB  # and it refreshed
    widget.close()


def test_mimebundle_has_widget_and_text_fallbacks(tmp_path):
    status = running()
    widget = JobWidget(FakeSession(tmp_path, status), status)
    bundle = widget._repr_mimebundle_()
    assert bundle[WIDGET_MIME]["model_id"] == widget.model_id
    assert bundle["text/plain"] == formatting.status_text(status)
    assert bundle["text/html"] == formatting.status_html(status)
    widget.close()


def test_widget_follows_status_changes_but_its_fallback_is_a_snapshot(tmp_path):
    session = FakeSession(tmp_path, running())
    widget = JobWidget(session, session.current)
    before = widget._repr_mimebundle_()["text/plain"]
    session.publish(JobStatus(context="default", state=NO_JOB))
    assert widget.view.state == NO_JOB
    assert "no job" in widget._repr_mimebundle_()["text/plain"]
    assert "running" in before
    widget.close()


def test_real_session_publishes_to_the_widget(tmp_path):
    """JobSession.add_listener end to end (no job needed: the no-job status path)."""
    session = JobSession(cwd=lambda: str(tmp_path))
    widget = JobWidget(session)
    seen = []
    widget.observe(lambda change: seen.append(change), names="children")
    assert widget.view.state == NO_JOB and widget.context == "default"
    heads = []
    session.add_listener(lambda status: heads.append(widget._head.value))
    session.status()
    assert heads and 'data-state="no job"' in heads[-1]
    widget.close()
    assert widget._on_status not in session._board.listeners


# ── run grid: the RunView protocol ──────────────────────────────────────
from monarch_jupyter.widgets.run_model import BATCH_LINES, TAIL, RunView, Throttle  # noqa: E402


class Clock:
    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_run_view_tiles_follow_events():
    clock = Clock(100.0)
    view = RunView(["hosts=0", "hosts=1", "hosts=2", "hosts=3"], title="%%remote hosts", clock=clock)
    assert [t.status for t in view.tiles] == ["pending"] * 4
    view.rank_started(0, "hosts=0")
    view.rank_started(1, "hosts=1")
    view.lines(0, [("out", "step 1"), ("err", "warn")])
    clock.t = 102.5
    assert view.tiles[0].status == "running" and view.tiles[0].last == "warn"
    assert view.tiles[0].elapsed(clock()) == 2.5
    view.rank_finished(0, "ok", 0, 2.4)
    view.rank_finished(1, "failed", 3, 1.0)
    view.lines(2, [("out", "late start")])  # lines before a start event still start the rank
    assert view.tiles[2].status == "running"
    view.rank_finished(2, "timed_out", None, 30.0)
    assert view.counts()["ok"] == 1 and view.counts()["pending"] == 1
    assert [t.rank for t in view.shown(failing_only=True)] == [1, 2]
    assert [t.rank for t in view.shown()] == [0, 1, 2, 3]
    assert view.output(0) == [("out", "step 1"), ("err", "warn")]
    assert view.summary() == "4 ranks: 1 ok, 1 failed, 1 timed out, 1 pending"
    view.finish()
    assert view.tiles[3].status == "skipped" and view.finished
    with pytest.raises(ValueError):
        view.rank_finished(0, "bogus", None, None)


def test_run_view_stop_marks_unfinished_ranks():
    view = RunView(["a", "b", "c"])
    view.rank_started(0)
    view.rank_started(1)
    view.rank_finished(1, "ok", 0, 0.1)
    view.stopping("interrupted")
    assert "stopping (interrupted)" in view.summary()
    view.finish("remote: stopped")
    assert [t.status for t in view.tiles] == ["interrupted", "ok", "interrupted"]
    assert view.summary() == "remote: stopped"


def test_run_view_batches_only_changes_and_bounds_lines():
    view = RunView(["a", "b"])
    first = view.take()
    assert [t["rank"] for t in first.tiles] == [0, 1] and first.lines == {}
    assert view.take() is None  # nothing changed
    view.lines(1, [("out", f"l{i}") for i in range(BATCH_LINES + 50)])
    batch = view.take()
    assert [t["rank"] for t in batch.tiles] == [1]  # started by its first lines
    assert len(batch.lines[1]) == BATCH_LINES and batch.lines[1][-1] == ["out", f"l{BATCH_LINES + 49}"]
    assert batch.dropped == {1: 50}
    assert batch.to_json()["lines"]["1"][0] == ["out", "l50"]
    assert len(view.output(1)) == TAIL and view.tiles[1].nlines == BATCH_LINES + 50
    view.lines(1, [("out", "more")])
    batch = view.take()
    assert batch.tiles == [] and batch.lines == {1: [["out", "more"]]}  # a line is not a tile change


def test_run_view_grows_for_unknown_ranks():
    view = RunView()
    view.rank_started(2, "hosts=2")
    assert [t.label for t in view.tiles] == ["rank 0", "rank 1", "hosts=2"]


def test_throttle():
    clock = Clock(10.0)
    throttle = Throttle(0.05, clock)
    assert throttle.due()
    throttle.mark()
    clock.t = 10.03
    assert not throttle.due() and abs(throttle.wait() - 0.02) < 1e-9
    clock.t = 10.05
    assert throttle.due()


# ── run grid: the widget ────────────────────────────────────────────────
try:  # anywidget is a dependency of the run grid (pyproject: "anywidget>=0.9")
    from monarch_jupyter.widgets.run import RemoteRunObserver, RunWidget
except ImportError:  # pragma: no cover - only until the dependency is in every venv
    RemoteRunObserver = RunWidget = None
needs_anywidget = pytest.mark.skipif(RunWidget is None, reason="anywidget is not installed")


class Sent:
    def __init__(self, widget) -> None:
        self.messages = []
        self.syncs = 0
        widget.send = lambda content, buffers=None: self.messages.append(content)
        original = widget.send_state

        def count(key=None):
            self.syncs += 1
            return original(key)

        widget.send_state = count


@needs_anywidget
def test_run_widget_sends_one_batch_per_interval_at_64_ranks():
    clock = Clock(0.0)
    labels = [f"hosts={i}" for i in range(64)]
    widget = RunWidget(labels, title="%%remote", start_timer=False, clock=clock)
    sent = Sent(widget)
    assert widget.batches == 1 and len(widget.tiles) == 64
    # 2 s of 64 ranks each printing every 5 ms: 25,600 lines, events every 5 ms
    for step in range(400):
        clock.t = step * 0.005
        for rank in range(64):
            if step == 0:
                widget.rank_started(rank, labels[rank])
            widget.lines(rank, [("out", f"r{rank} line {step}")])
    widget.flush()  # what the timer does after the last event
    assert widget.batches - 1 <= 2.0 / 0.05 + 2  # one flush per 50 ms, not per line
    assert sent.syncs <= widget.batches  # one state sync per flush (hold_sync)
    assert len(sent.messages) <= widget.batches
    got = {}
    for message in sent.messages:
        for rank, lines in message["lines"].items():
            got.setdefault(rank, []).extend(lines)
    assert got["63"][-1] == ["out", "r63 line 399"] and len(got["0"]) == 400  # nothing lost
    assert all(t["status"] == "running" for t in widget.tiles)
    for rank in range(64):
        widget.rank_finished(rank, "ok" if rank % 8 else "failed", 0 if rank % 8 else 1, 2.0)
    widget.finish("remote: 56 ok, 8 failed")
    assert widget.finished and widget.summary == "remote: 56 ok, 8 failed"
    assert [t["rank"] for t in widget.tiles if t["status"] == "failed"] == list(range(0, 64, 8))
    assert widget.tails["5"][-1] == ["out", "r5 line 399"]
    widget.close()


@needs_anywidget
def test_run_widget_timer_flushes_the_last_batch():
    widget = RunWidget(["a"], interval=0.05)
    widget.rank_started(0)  # due: flushed at once
    before = widget.batches
    widget.lines(0, [("out", "x")])  # within 50 ms: left to the timer
    deadline = time.monotonic() + 2
    while widget.batches == before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert widget.batches == before + 1
    widget.close()


@needs_anywidget
def test_run_widget_bundle_and_stop_message():
    stops = []
    widget = RunWidget(["a", "b"], title="%%remote", start_timer=False, on_stop=lambda: stops.append(1))
    data = widget._repr_mimebundle_()
    data = data[0] if isinstance(data, tuple) else data
    assert data[WIDGET_MIME]["model_id"] == widget.model_id
    assert data["text/plain"] == "%%remote"  # stable: the run result follows as its own output
    assert data["text/html"] == "<b>%%remote</b>"
    widget._on_front_end_msg(widget, {"kind": "stop"}, [])
    assert stops == [1]
    widget.close()


@needs_anywidget
def test_remote_observer_adapts_run_state_events():
    """The %%remote RunState observer interface, with the real model classes."""
    model = pytest.importorskip("monarch_jupyter.remote.model")
    shown = []
    observer = RemoteRunObserver(show=shown.append, placeholder=lambda text: None, show_after=0, start_timer=False)
    ranks = [model.RankState(label=f"hosts={i}", mesh="hosts", point={"hosts": i}, rank=i) for i in range(2)]
    state = model.RunState(command="echo", mode="bash", target="hosts", ranks=ranks, started=time.time(),
                           observers=[observer])
    state.apply(model.Started(0))
    state.apply(model.Output(0, model.OUT, "one\ntw"))
    state.apply(model.Output(0, model.OUT, "o\n"))
    state.apply(model.Exited(0, 0, 0.5))
    state.apply(model.Started(1))
    state.apply(model.Output(1, model.ERR, "bad\n"))
    state.apply(model.Stopping("interrupted"))
    state.apply(model.Finished())
    widget = observer.widget
    assert shown == [widget]
    view = widget.view
    assert [t.status for t in view.tiles] == ["ok", "interrupted"]
    assert view.output(0) == [("out", "one"), ("out", "two")]
    assert view.output(1) == [("err", "bad")]
    assert view.final_summary == state.summary_line() and widget.finished
    # a second run gets a new widget
    state2 = model.RunState(command="x", mode="bash", target="hosts", ranks=[model.RankState("h", "hosts", {}, 0)],
                            started=time.time(), observers=[observer])
    state2.apply(model.Started(0))
    assert observer.widget is not widget and len(shown) == 2
    widget.close()
    observer.widget.close()


def test_widgets_only_where_there_is_a_kernel():
    from monarch_jupyter.widgets import in_widget_kernel

    class Terminal:  # TerminalInteractiveShell has no .kernel
        pass

    class KernelShell:
        kernel = object()

    assert not in_widget_kernel(Terminal())
    assert in_widget_kernel(KernelShell())


@needs_anywidget
def test_grid_replaces_its_placeholder_only_once_the_run_lasts():
    model = pytest.importorskip("monarch_jupyter.remote.model")
    now = [0.0]
    placeholders, updates = [], []

    class Handle:
        def update(self, obj):
            updates.append(obj)

    def placeholder(text):
        placeholders.append(text)
        return Handle()

    observer = RemoteRunObserver(placeholder=placeholder, clock=lambda: now[0], start_timer=False)
    ranks = [model.RankState(label=f"hosts={i}", mesh="hosts", point={"hosts": i}, rank=i) for i in range(2)]
    state = model.RunState(command="echo", mode="bash", target="mesh hosts (2 ranks)", ranks=ranks,
                           started=time.time(), observers=[observer])
    state.apply(model.Started(0))
    state.apply(model.Output(0, model.OUT, "early\n"))
    assert placeholders == ["%%remote mesh hosts (2 ranks)"]
    assert observer.widget is None and updates == []
    now[0] = 0.31
    observer.on_tick(state)  # a silent run still gets its grid
    widget = observer.widget
    assert updates == [widget]
    bundle = widget._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    assert bundle["text/plain"] == placeholders[0]
    assert widget.view.output(0) == [("out", "early")]
    assert widget.tails == {"0": [["out", "early"]]}  # what a view rendered now starts from
    state.apply(model.Exited(0, 0, 0.4))
    assert widget.view.tiles[0].status == "ok"
    widget.close()


@needs_anywidget
def test_fast_runs_never_build_the_widget():
    model = pytest.importorskip("monarch_jupyter.remote.model")
    observer = RemoteRunObserver(placeholder=lambda text: None, clock=lambda: 0.0, start_timer=False)
    ranks = [model.RankState(label="hosts=0", mesh="hosts", point={"hosts": 0}, rank=0)]
    state = model.RunState(command="true", mode="bash", target="hosts", ranks=ranks, started=time.time(),
                           observers=[observer])
    for event in (model.Started(0), model.Exited(0, 0, 0.01), model.Finished()):
        state.apply(event)
    assert observer.widget is None
