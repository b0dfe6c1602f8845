"""The job widget and the run grid without a browser: view data, state transitions, bundles."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from monarch_jupyter.errors import NoJobError
from monarch_jupyter.jobs import formatting
from monarch_jupyter.jobs.facade import JobContext
from monarch_jupyter.jobs.status import NO_JOB, NOT_RUNNING, RUNNING, WORKERS_DEAD, JobStatus, MeshStatus
from monarch_jupyter.widgets.job import JobWidget, actions, details_html, header_html, job_view

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def running(context: str = "default", hosts: int = 2, live: int = 2, **extra) -> JobStatus:
    return JobStatus(
        context=context,
        state=RUNNING,
        job_class="ProcessJob",
        apply_id="46cedd42-7289-40bd-aaee-9a152d09104d",
        spec="monarch_jupyter.local_jobs.hosts_2",
        meshes=[MeshStatus("hosts", hosts, live)],
        applied_at=1000.0,
        attached=True,
        cache_path=".monarch/default/state.pkl",
        **extra,
    )


class FakeSession:
    """What JobWidget uses of JobContext: root, status, kill, add_listener."""

    def __init__(self, root: Path, status: JobStatus) -> None:
        self.root = root
        self.current = status
        self.listeners = []
        self.kills = []
        self.applied = []

    def add_listener(self, fn):
        self.listeners.append(fn)
        return lambda: self.listeners.remove(fn) if fn in self.listeners else None

    def publish(self, status: JobStatus) -> None:
        for fn in list(self.listeners):
            fn(status)

    def status(self, context=None):
        self.publish(self.current)
        return self.current

    def apply(self, spec=None):
        from monarch_jupyter.jobs.status import ApplyResult

        self.applied.append(spec)
        self.current = running(context=self.current.context)
        self.publish(self.current)
        return ApplyResult(self.current, changed=True)

    def kill(self, context=None):
        if self.current.state == NO_JOB:
            raise NoJobError(f"no job to kill in context '{context}'")
        before, self.current = self.current, JobStatus(context=context, state=NO_JOB, spec=self.current.spec)
        self.kills.append(context)
        self.publish(self.current)
        return before


# ── pure view data ──────────────────────────────────────────────────────
def test_view_of_a_running_job():
    view = job_view(
        running(
            urls={"telemetry": "http://127.0.0.1:9000/t", "dashboard": None, "admin": "tcp://10.0.0.1:26600"}
        )
    )
    assert (view.state, view.context, view.job_class) == (RUNNING, "default", "ProcessJob")
    assert view.colour == "#1a7f37" and view.can_kill
    assert [(m.name, m.hosts, m.live_workers) for m in view.meshes] == [("hosts", "2", "2")]
    assert view.total_hosts == 2
    # an absolute local time, which the view follows with a live "· N ago" (job.js)
    assert view.applied == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1000.0))
    assert view.applied_at == 1000.0 and not view.can_apply
    assert view.links == [("telemetry", "http://127.0.0.1:9000/t")]  # only http(s) become links
    assert view.other_urls == [("admin", "tcp://10.0.0.1:26600")]
    assert view.hint == ""
    body = details_html(view)
    assert "<a href='http://127.0.0.1:9000/t'" in body and "tcp://10.0.0.1:26600" in body
    assert "class='monarch-job-mesh' data-mesh='hosts'" in body
    assert 'data-state="running"' in header_html(view)
    assert f"<time datetime='1970-01-01T00:16:40Z' data-monarch-since='1000'>{view.applied}</time>" in body
    assert [a.id for a in actions(view)] == ["refresh", "kill"]  # no Apply while it runs


def test_view_of_no_job_and_dead_workers():
    none = job_view(JobStatus(context="exp", state=NO_JOB))
    assert not none.can_kill and none.meshes == [] and "%job apply --local hosts=2" in none.hint
    assert "monarch-job-apply-id" not in details_html(none)  # no class/apply id rows
    shown = {a.id: a for a in actions(none)}
    assert list(shown) == ["apply", "refresh", "kill"]
    assert shown["apply"].label == "Apply local hosts=2" and shown["apply"].style == "accept"
    assert shown["kill"].disabled and shown["kill"].why  # disabled, and says why
    saved = job_view(JobStatus(context="exp", state=NOT_RUNNING, spec="mod.job"))
    assert actions(saved)[0].label == "Apply"  # the saved spec, as a bare %job apply
    dead = job_view(
        JobStatus(
            context="exp",
            state=WORKERS_DEAD,
            job_class="ProcessJob",
            meshes=[MeshStatus("hosts", 2, 0), MeshStatus("gpus", None, None)],
        )
    )
    assert dead.can_kill and dead.colour == "#cf222e" and "Kill clears the cache" in dead.hint
    assert [(m.hosts, m.live_workers) for m in dead.meshes] == [("2", "0"), ("?", "?")]
    assert dead.total_hosts == 2


def test_view_escapes_html():
    view = job_view(JobStatus(context="x", state=RUNNING, job_class="<b>", spec="<script>"))
    assert "<script>" not in details_html(view) and "&lt;script&gt;" in details_html(view)


# ── widget: transitions and bundle ───────────────────────────────────────
def buttons(widget: JobWidget) -> dict[str, dict]:
    return {action["id"]: action for action in widget.actions}


def front_end(widget: JobWidget, **content) -> None:
    """A message as job.js sends it."""
    widget._on_front_end_msg(widget, content, [])


def test_widget_follows_published_statuses(tmp_path):
    session = FakeSession(tmp_path, running())
    widget = JobWidget(session, session.current)
    try:
        assert widget.view.state == RUNNING and not buttons(widget)["kill"].get("disabled")
        session.publish(running(context="other", hosts=8))  # another context: ignored
        assert widget.view.total_hosts == 2
        session.publish(running(hosts=3, live=1))  # e.g. %job apply from another cell
        assert (widget.view.meshes[0].hosts, widget.view.meshes[0].live_workers) == ("3", "1")
        assert 'data-state="running"' in widget.head
        session.publish(JobStatus(context="default", state=NO_JOB))  # %job kill elsewhere
        assert widget.view.state == NO_JOB and buttons(widget)["kill"]["disabled"]
        assert 'data-state="no job"' in widget.head
    finally:
        widget.close()
    assert session.listeners == []  # closing unsubscribes


def test_actions_are_plain_data_and_kill_is_confirmed(tmp_path):
    session = FakeSession(tmp_path, running())
    widget = JobWidget(session, session.current)
    try:
        assert [a["id"] for a in widget.actions] == ["refresh", "kill"]
        assert buttons(widget)["kill"]["confirm"] and buttons(widget)["kill"]["style"] == "danger"
        front_end(widget, kind="action", id="kill")  # sent by job.js after Confirm
        assert session.kills == ["default"]
        assert widget.view.state == NO_JOB and buttons(widget)["kill"]["disabled"]
        assert "killed the job of context 'default'" in widget.message
        front_end(widget, kind="action", id="refresh")
        assert widget.view.state == NO_JOB and widget.message == ""
        front_end(widget, kind="action", id="nope")
        assert widget.message_error and "nope" in widget.message
    finally:
        widget.close()


def test_apply_starts_the_default_local_job_where_none_was_applied(tmp_path):
    from monarch_jupyter.jobs.specs.base import LocalSpec

    session = FakeSession(tmp_path, JobStatus(context="default", state=NO_JOB))
    widget = JobWidget(session, session.current)
    try:
        assert buttons(widget)["apply"]["label"] == "Apply local hosts=2"
        front_end(widget, kind="action", id="apply")
        assert len(session.applied) == 1 and isinstance(session.applied[0], LocalSpec)
        assert widget.view.state == RUNNING and "apply" not in buttons(widget)
        assert widget.message.startswith("applied: context 'default'") and not widget.message_error
    finally:
        widget.close()
    session = FakeSession(tmp_path, JobStatus(context="default", state=NOT_RUNNING, spec="mod.job"))
    widget = JobWidget(session, session.current)
    try:
        widget.press("apply")
        assert session.applied == [None]  # a bare %job apply: the saved spec
    finally:
        widget.close()


def test_an_action_can_be_added_by_id(tmp_path):
    session = FakeSession(tmp_path, running())
    widget = JobWidget(session, session.current)
    pressed = []
    widget.handlers["dashboard"] = lambda: pressed.append(True)
    front_end(widget, kind="action", id="dashboard")
    assert pressed == [True]
    widget.close()


def test_kill_error_is_shown_not_raised(tmp_path):
    session = FakeSession(tmp_path, running())
    widget = JobWidget(session, session.current)
    session.current = JobStatus(context="default", state=NO_JOB)  # killed behind the widget's back
    widget.press("kill")
    assert "no job to kill" in widget.message and widget.message_error
    assert widget.view.state == NO_JOB  # and it refreshed
    widget.close()


def test_the_job_output_is_static_first_and_names_its_model(tmp_path):
    """One bundle: text, self-contained HTML and our payload naming the model; no widget view
    (a saved one outranks the HTML wherever our labextension is not: "model not found")."""
    status = running()
    widget = JobWidget(FakeSession(tmp_path, status), status)
    bundle, metadata = widget._repr_mimebundle_()
    assert bundle == widget.static_bundle() and metadata == {}
    assert set(bundle) == {"text/plain", "text/html", formatting.JOB_MIME}
    assert bundle[formatting.JOB_MIME]["model_id"] == widget.model_id
    assert bundle[formatting.JOB_MIME]["state"] == RUNNING
    # a saved copy: no "N ago" (wrong once reopened), and when it was last true
    assert " ago)" not in bundle["text/plain"] and "as of" in bundle["text/plain"]
    assert "as of" in bundle["text/html"] and "<script" not in bundle["text/html"]
    widget.close()


def test_a_later_status_republishes_the_output_by_its_display_id(tmp_path):
    """A later %job kill (any cell, any widget's button) updates this output, so the saved
    notebook shows the last state, not "running" for a job its own last cell killed."""
    session = FakeSession(tmp_path, running())
    published = []
    widget = JobWidget(session, session.current, publish=lambda bundle, did: published.append((bundle, did)))
    assert published == []  # displayed by the caller, once
    session.publish(JobStatus(context="default", state=NO_JOB))
    session.publish(JobStatus(context="other", state=RUNNING))  # another context: not ours
    assert [did for _, did in published] == [widget.display_id]
    bundle = published[0][0]
    assert bundle[formatting.JOB_MIME]["state"] == NO_JOB and "no job" in bundle["text/plain"]
    session.publish(JobStatus(context="default", state=NO_JOB))  # the same again: no update message
    assert len(published) == 1
    widget.republish(clock=lambda: time.monotonic() + 61)  # unchanged, but its "as of" a minute old
    assert len(published) == 2
    published.pop()
    widget.close()
    session.publish(JobStatus(context="default", state=RUNNING))  # closed: no more updates
    assert len(published) == 1


def test_widget_follows_status_changes(tmp_path):
    session = FakeSession(tmp_path, running())
    widget = JobWidget(session, session.current)

    def plain():
        return widget.static_bundle()["text/plain"]

    before = plain()
    session.publish(JobStatus(context="default", state=NO_JOB))
    assert widget.view.state == NO_JOB
    assert "no job" in plain()
    assert "running" in before
    widget.close()


def test_real_session_publishes_to_the_widget(tmp_path):
    """JobContext.add_listener end to end (no job needed: the no-job status path)."""
    session = JobContext(cwd=lambda: str(tmp_path))
    widget = JobWidget(session)
    assert widget.view.state == NO_JOB and widget.context == "default"
    heads = []
    session.add_listener(lambda status: heads.append(widget.head))
    session.status()
    assert heads and 'data-state="no job"' in heads[-1]
    widget.close()
    assert widget._on_status not in session._board.listeners


def test_topology_is_sampled_only_while_watched(tmp_path):
    from monarch_jupyter.jobs.services import topology

    calls = []

    def sample(urls, previous):
        calls.append(urls["admin"])
        rows = [
            {"kind": "host", "id": "h", "name": "h0"},
            {"kind": "proc", "id": "p", "parent": "h", "name": "p0", "rss": 2_000_000},
            {
                "kind": "actor",
                "id": "a",
                "parent": "p",
                "name": "counter",
                "messages": len(calls),
                "queue": 0,
            },
        ]
        return topology.build(rows, previous)

    admin = {"admin": "http://localhost:1/"}
    session = FakeSession(tmp_path, running(urls=admin))
    widget = JobWidget(session, session.current, sample=sample, interval=0.01)
    try:
        assert widget.topology_available and widget.topology == {}
        time.sleep(0.05)
        assert calls == []  # nobody looks: nothing sampled
        front_end(widget, kind="watch", view="v1", on=True)
        deadline = time.monotonic() + 5
        while len(calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(calls) >= 3
        actor = widget.topology["hosts"][0]["procs"][0]["actors"][0]
        assert actor["name"] == "counter" and actor["messages"] >= 1
        front_end(widget, kind="watch", view="v1", on=False)
        time.sleep(0.05)
        seen = len(calls)
        time.sleep(0.1)
        assert len(calls) == seen  # off screen: sampling stopped
        session.publish(JobStatus(context="default", state=NO_JOB))
        assert not widget.topology_available and widget.topology == {}
    finally:
        widget.close()


def test_a_view_not_heard_of_for_the_ttl_stops_the_sampling(tmp_path, monkeypatch):
    from monarch_jupyter.widgets import job

    session = FakeSession(tmp_path, running(urls={"admin": "http://localhost:1/"}))
    widget = JobWidget(session, session.current)
    monkeypatch.setattr(job, "WATCH_TTL", -1.0)  # already expired: a tab closed without a word
    widget._watchers["gone"] = time.monotonic() + job.WATCH_TTL
    assert not widget.watched and widget._watchers == {}
    widget.close()


def test_a_widget_without_admin_has_no_topology(tmp_path):
    session = FakeSession(tmp_path, running())
    widget = JobWidget(session, session.current, sample=lambda urls, prev: None)
    assert not widget.topology_available and widget.refresh_topology() is None
    widget.close()


# ── run grid: a view of the run model ───────────────────────────────────
from monarch_jupyter.remote.view import model  # noqa: E402
from monarch_jupyter.widgets.run_model import BATCH_LINES, GridSync, Throttle, tails, tile_json  # noqa: E402


class Clock:
    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def run_state(n: int, clock=None, observers=(), labels=None) -> model.RunState:
    labels = labels or [f"hosts={i}" for i in range(n)]
    ranks = [
        model.RankState(label=label, mesh="hosts", point={"hosts": i}, rank=i)
        for i, label in enumerate(labels)
    ]
    return model.RunState(
        command="echo",
        mode="bash",
        target=f"mesh hosts ({n} ranks)",
        ranks=ranks,
        started=100.0,
        observers=list(observers),
        clock=clock or time.time,
    )


def test_tiles_are_read_from_the_run_model():
    clock = Clock(100.0)
    state = run_state(4, clock)
    assert [tile_json(i, r)["status"] for i, r in enumerate(state.ranks)] == ["pending"] * 4
    assert state.progress_line() == "4 ranks: 4 pending"
    state.apply(model.Started(0))
    state.apply(model.Started(1))
    state.apply(model.Output(0, model.OUT, "step 1\n"))
    state.apply(model.Output(0, model.ERR, "warn\n"))
    clock.t = 102.5
    state.apply(model.Exited(0, 0, 2.4))
    state.apply(model.Exited(1, 3, 1.0))
    state.apply(model.Output(2, model.OUT, "late start\n"))  # lines before a start event still start the rank
    assert state.ranks[2].status == "running" and state.ranks[2].started == 102.5
    tile = tile_json(0, state.ranks[0])
    assert tile == {
        "rank": 0,
        "label": "hosts=0",
        "status": "ok",
        "failing": False,
        "returncode": 0,
        "duration": 2.4,
        "started": 100.0,
        "error": None,
        "quiet_since": None,
        "progress": None,
    }
    assert tile_json(1, state.ranks[1])["failing"] is True
    assert [r.rank for r in state.failing()] == [1]
    assert state.progress_line() == "4 ranks: 1 running, 1 ok, 1 failed, 1 pending"
    state.apply(model.Stopping("timed_out"))
    assert state.progress_line().endswith(" · stopping (timed out)")
    state.apply(model.Finished())
    # one end-of-run rule: the running rank ends as the stop reason, the silent one too
    assert [r.status for r in state.ranks] == ["ok", "failed", "timed_out", "timed_out"]
    assert state.progress_line() == state.summary_line()
    assert tails(state) == {"0": [["out", "step 1"], ["err", "warn"]], "2": [["out", "late start"]]}


def test_grid_sync_sends_only_changes_and_bounds_lines():
    state = run_state(2)
    sync = GridSync(state)
    first = sync.take()
    assert [t["rank"] for t in first.tiles] == [0, 1] and first.lines == {} and first.message() is None
    assert sync.take() is None  # nothing changed
    state.apply(model.Output(1, model.OUT, "".join(f"l{i}\n" for i in range(BATCH_LINES + 50))))
    batch = sync.take()
    assert [t["status"] for t in batch.tiles] == ["pending", "running"]  # started by its first lines
    assert len(batch.lines[1]) == BATCH_LINES and batch.lines[1][-1] == ["out", f"l{BATCH_LINES + 49}"]
    assert batch.dropped == {1: 50}
    assert batch.message()["lines"]["1"][0] == ["out", "l50"] and batch.message()["dropped"] == {"1": 50}
    state.apply(model.Output(1, model.OUT, "more\n"))
    batch = sync.take()
    assert batch.tiles is None and batch.lines == {1: [["out", "more"]]}  # a line is not a tile change
    state.apply(model.Output(0, model.OUT, "partial"))  # an unfinished line: the tile starts, no line yet
    batch = sync.take()
    assert batch.tiles[0]["status"] == "running" and batch.lines == {}
    state.apply(model.Stopping("interrupted"))
    batch = sync.take()
    assert (
        batch.tiles is None and batch.stopping == "interrupted" and "stopping (interrupted)" in batch.summary
    )
    state.apply(model.Finished())
    batch = sync.take()
    assert batch.finished and batch.lines == {0: [["out", "partial"]]}  # closed by the end of the run
    assert [t["status"] for t in batch.tiles] == ["interrupted", "interrupted"]


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
from monarch_jupyter.widgets import RemoteRunObserver  # noqa: E402
from monarch_jupyter.widgets.comm_model import Model  # noqa: E402

try:  # anywidget is a dependency of the run grid (pyproject: "anywidget>=0.9")
    from monarch_jupyter.widgets.run import RunWidget
except ImportError:  # pragma: no cover - only until the dependency is in every venv
    RunWidget = None
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
    state = run_state(64)
    widget = RunWidget(state, title="%%remote", clock=clock, bounded=False)  # every tile (no view)
    state.observers.append(widget)
    sent = Sent(widget)
    assert widget.batches == 1 and len(widget.tiles) == 64
    # 2 s of 64 ranks each printing every 5 ms: 25,600 lines, events every 5 ms
    for step in range(400):
        clock.t = step * 0.005
        for rank in range(64):
            if step == 0:
                state.apply(model.Started(rank))
            state.apply(model.Output(rank, model.OUT, f"r{rank} line {step}\n"))
    clock.t += 0.05
    widget.on_tick(state)  # what the magic does between events
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
        state.apply(model.Exited(rank, 0 if rank % 8 else 1, 2.0))
    state.apply(model.Finished())  # sent at once, whatever the throttle says
    assert widget.finished and widget.summary == state.summary_line()
    assert [t["rank"] for t in widget.tiles if t["failing"]] == list(range(0, 64, 8))
    assert widget.tails["5"][-1] == ["out", "r5 line 399"]
    assert widget.state is None  # the finished run is not kept alive by its grid
    widget.close()


@needs_anywidget
def test_run_widget_tick_flushes_the_last_batch():
    clock = Clock(0.0)
    state = run_state(1)
    widget = RunWidget(state, clock=clock)
    state.observers.append(widget)
    state.apply(model.Started(0))  # due: flushed at once
    before = widget.batches
    clock.t = 0.01
    state.apply(model.Output(0, model.OUT, "x\n"))  # within 50 ms: left for later
    widget.on_tick(state)
    assert widget.batches == before
    clock.t = 0.06
    widget.on_tick(state)
    assert widget.batches == before + 1
    clock.t = 0.2
    widget.on_tick(state)  # nothing changed: nothing sent
    assert widget.batches == before + 1
    widget.close()


@needs_anywidget
def test_run_widget_bundle_and_stop_message():
    stops = []
    widget = RunWidget(run_state(2), title="%%remote", on_stop=lambda: stops.append(1))
    data = widget._repr_mimebundle_()
    data = data[0] if isinstance(data, tuple) else data
    assert WIDGET_MIME not in data  # static first
    assert data["text/plain"] == "%%remote"  # stable: the run result follows as its own output
    assert data["text/html"] == "<b>%%remote</b>"
    widget._on_front_end_msg(widget, {"kind": "stop"}, [])
    assert stops == [1]
    widget.close()


class Shown(list):
    """What an observer displayed: (bundle, display_id, update) per call."""

    def __call__(self, bundle, display_id, update):
        self.append((bundle, display_id, update))

    def models(self):
        return [bundle[model.MIME_TYPE]["model_id"] for bundle, _, _ in self]


@needs_anywidget
def test_remote_observer_shows_a_widget_per_run():
    """The %%remote RunState observer interface, with the real model classes."""
    shown = Shown()
    observer = RemoteRunObserver(show_after=0, show_bundle=shown)
    state = run_state(2, observers=[observer])
    state.apply(model.Started(0))
    state.apply(model.Output(0, model.OUT, "one\ntw"))
    state.apply(model.Output(0, model.OUT, "o\n"))
    state.apply(model.Exited(0, 0, 0.5))
    state.apply(model.Started(1))
    state.apply(model.Output(1, model.ERR, "bad\n"))
    state.apply(model.Stopping("interrupted"))
    state.apply(model.Finished())
    widget = observer.widget
    assert shown.models() == [widget.model_id]
    assert [t["status"] for t in widget.tiles] == ["ok", "interrupted"]
    assert widget.tails == {"0": [["out", "one"], ["out", "two"]], "1": [["err", "bad"]]}
    assert widget.summary == state.summary_line() and widget.finished
    # a second run gets a new widget, in its own place
    state2 = run_state(1, observers=[observer])
    state2.apply(model.Started(0))
    assert observer.widget is not widget and shown.models() == [widget.model_id, observer.widget.model_id]
    assert shown[0][1] != shown[1][1]
    assert observer.result_place(state) is None  # the first run's grid is no longer the observer's
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
def test_grid_shows_only_once_the_run_lasts():
    now = Clock(0.0)
    shown = Shown()
    observer = RemoteRunObserver(show_bundle=shown, clock=now)
    state = run_state(2, observers=[observer])
    state.apply(model.Started(0))
    state.apply(model.Output(0, model.OUT, "early\n"))
    assert shown == [] and observer.widget is None  # nothing displayed yet, not even a placeholder
    now.t = 0.29
    observer.on_tick(state)
    assert shown == []
    now.t = 0.31
    observer.on_tick(state)  # a silent run still gets its grid
    widget = observer.widget
    assert shown.models() == [widget.model_id]
    assert shown[0][0]["text/plain"] == "%%remote mesh hosts (2 ranks)"
    assert widget.tails == {"0": [["out", "early"]]}  # what a view rendered now starts from
    sent = Sent(widget)
    state.apply(model.Output(0, model.OUT, "later\n"))
    state.apply(model.Exited(0, 0, 0.4))
    now.t = 0.4
    observer.on_tick(state)
    assert widget.tiles[0]["status"] == "ok"
    assert sent.messages == [
        {"kind": "lines", "lines": {"0": [["out", "later"]]}, "dropped": {}}
    ]  # not "early" again
    assert len(shown) == 1  # shown once
    widget.close()


def test_fast_runs_show_nothing_and_never_build_the_widget():
    shown = Shown()
    observer = RemoteRunObserver(show_bundle=shown, clock=lambda: 0.0)
    state = run_state(1, observers=[observer])
    for event in (model.Started(0), model.Exited(0, 0, 0.01), model.Finished()):
        state.apply(event)
    assert observer.widget is None and shown == []
    assert observer.result_place(state) is None  # the magic shows the result as a new output


@needs_anywidget
def test_the_grid_is_one_output_with_its_running_copy_and_the_result_takes_its_place():
    """The grid's one output: the widget's view, a text title and the run's payload with state
    running and its id (what a notebook saved mid-run renders without its kernel: "still running
    when saved — %remote attach <id>"). Nothing is sent at the end: the magic puts the result in
    the grid's place, clearing the lines first once a view said it drew them."""
    shown = Shown()
    observer = RemoteRunObserver(show_after=0, show_bundle=shown)
    state = run_state(2, observers=[observer])
    state.run_id = "20261201-010203-abc123"
    state.apply(model.Started(0))
    state.apply(model.Output(0, model.OUT, "step 1\n"))
    assert len(shown) == 1
    bundle, display_id, update = shown[0]
    assert display_id == "monarch-run-20261201-010203-abc123" and update is False
    assert WIDGET_MIME not in bundle  # static first: no saved view outranks the copy
    assert bundle[model.MIME_TYPE]["model_id"] == observer.widget.model_id
    assert bundle["text/plain"] == "%%remote mesh hosts (2 ranks)"
    payload = bundle[model.MIME_TYPE]
    assert payload["version"] == 2 and payload["state"] == "running"
    assert payload["run_id"] == "20261201-010203-abc123"
    assert payload["ranks"][0]["status"] == "running"
    assert "%remote attach 20261201-010203-abc123" in bundle["text/html"]
    state.apply(model.Output(0, model.OUT, "step 2\n"))
    assert len(shown) == 1  # shown once, not on every event
    # no lines in the copy: it is drawn only where the live grid cannot be, and they would be stale
    assert state.running_bundle()[model.MIME_TYPE]["ranks"][0]["lines"] == []
    assert state.to_mime()["ranks"][0]["lines"] == [["out", "step 1"], ["out", "step 2"]]
    assert observer.result_place(state) == (display_id, False)  # no view said it drew the lines
    observer.widget._on_update({"shown": True})  # what run.js sends after its first draw
    assert observer.result_place(state) == (display_id, True)
    state.apply(model.Exited(0, 0, 0.5))
    state.apply(model.Exited(1, 0, 0.5))
    state.apply(model.Finished())
    assert len(shown) == 1 and state.to_mime()["state"] == "finished"
    assert observer.result_place(state) == (display_id, True)  # still there for the magic's end
    widget = observer.widget
    assert widget.model_id in Model.instances
    observer.on_result(state)  # the magic showed the result in the grid's place
    assert widget.model_id not in Model.instances and observer.widget is None
    assert observer.result_place(state) is None


@needs_anywidget
def test_a_run_without_id_has_its_grid_placed_by_the_model_id():
    shown = Shown()
    observer = RemoteRunObserver(show_after=0, show_bundle=shown)
    state = run_state(1, observers=[observer])
    state.apply(model.Started(0))
    state.apply(model.Finished())
    assert [d for _, d, _ in shown] == [f"monarch-run-{observer.widget.model_id}"]
    observer.widget.close()
