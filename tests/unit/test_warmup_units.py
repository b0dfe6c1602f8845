"""The %load_ext line from plain files and the background attach (no kernel, no Monarch).

A small stand-in session records attach() calls; the real kernel path is in
tests/integration/test_lazy_load.py.
"""

from __future__ import annotations

import _thread
import json
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from monarch_jupyter.errors import CacheError
from monarch_jupyter.jobs import local_records as _local_records
from monarch_jupyter.jobs import signing as _signing
from monarch_jupyter.jobs import warmup as _warmup
from monarch_jupyter.jobs.contexts import Layout
from monarch_jupyter.jobs.status import NO_JOB, RUNNING, JobStatus

APPLY_ID = "0123abcd-0000-0000-0000-000000000000"


class StandInSession:
    """What begin() uses of a JobContext: layout, attached, attach(), ready_hook."""

    attached = False

    def __init__(self, root: Path, attach=None) -> None:
        self.layout = Layout(root)
        self.ready_hook = None
        self.calls: list[str] = []
        self._attach = attach or (lambda: JobStatus(context="default", state=NO_JOB))

    def attach(self) -> JobStatus:
        self.calls.append(threading.current_thread().name)
        return self._attach()


def write_cache(
    root: Path,
    pids: dict[str, int] | None,
    *,
    fresh: bool = True,
    hosts: int = 1,
    local: bool | None = True,
    keys: list[str] | None = None,
) -> Path:
    """A context with a (harmless) pickle and, unless pids is None, a status.json about it
    (without ``workers_local`` when ``local`` is None, as written before it existed; the PIDs
    keyed ``hosts_<i>`` unless ``keys`` are given)."""
    layout = Layout(root)
    layout.ensure()
    state = layout.state_path("default")
    state.write_bytes(pickle.dumps({"a": "job"}))
    _signing.sign(state, state.read_bytes())
    state.chmod(0o600)
    if pids is not None:
        applied = state.stat().st_mtime if fresh else state.stat().st_mtime - 60
        data = {
            "context": "default",
            "state": RUNNING,
            "job_class": "ProcessJob",
            "apply_id": APPLY_ID,
            "spec": "monarch_jupyter.local_jobs.hosts_1",
            "attached": True,
            "applied_at": applied,
            "meshes": [{"name": "hosts", "hosts": hosts, "live_workers": hosts}],
            "worker_pids": dict(
                zip(keys or [f"hosts_{i}" for i in range(len(pids))], pids.values(), strict=True)
            ),
            "workers_local": local,
        }
        if local is None:
            del data["workers_local"]
        layout.write_status("default", data)
    return state


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_no_cache_attaches_at_once_and_schedules_nothing(tmp_path):
    session = StandInSession(tmp_path)
    line = _warmup.begin(session)
    assert line.startswith("monarch_jupyter: no job in context 'default' yet")
    assert session.calls == [threading.current_thread().name]
    assert session.ready_hook is None


def test_fresh_status_with_live_workers_says_re_attaching_then_attaches_in_background(tmp_path):
    release = threading.Event()
    session = StandInSession(tmp_path, attach=lambda: (release.wait(5), JobStatus("default", RUNNING))[1])
    write_cache(tmp_path, {"w": os.getpid()})  # a live python process stands in for the worker
    line = _warmup.begin(session)
    assert line.startswith(
        "monarch_jupyter: re-attaching to context 'default': ProcessJob 0123abcd, hosts×1 (1 live)"
    )
    assert f"apply id {APPLY_ID}" in line and "\n" not in line
    assert session.ready_hook is not None
    waiter = threading.Thread(target=session.ready_hook)
    waiter.start()
    time.sleep(0.1)
    assert waiter.is_alive(), "the hook waits for the attach"
    release.set()
    waiter.join(5)
    assert not waiter.is_alive()
    assert session.calls == ["monarch-jupyter-attach"]
    assert session.ready_hook is None, "the hook removes itself once the attach is done"


def test_dead_worker_is_reported_from_the_files(tmp_path):
    session = StandInSession(tmp_path)
    write_cache(tmp_path, {"w0": os.getpid(), "w1": dead_pid()}, hosts=2)
    line = _warmup.begin(session)
    assert "has lost its workers" in line and "left as it is" in line
    session.ready_hook()
    assert session.calls == ["monarch-jupyter-attach"]


@pytest.mark.parametrize("case", ["stale", "missing", "fifo", "not local"])
def test_unvouched_cache_only_says_it_is_attaching(tmp_path, case):
    """Not about this pickle, no status, a FIFO, or PIDs the engine says are not the
    workers on this machine (even keyed like local ones): never judged from /proc."""
    session = StandInSession(tmp_path)
    pids = None if case in ("missing", "fifo") else {"w": os.getpid()}
    write_cache(tmp_path, pids, fresh=case == "not local", local=case != "not local")
    if case == "fifo":
        os.mkfifo(tmp_path / ".monarch/default/status.json")  # must not block the load
    started = time.monotonic()
    line = _warmup.begin(session)
    assert time.monotonic() - started < 2
    assert line == (
        "monarch_jupyter: attaching to the cached job of context 'default' in the background; %job shows it"
    )
    session.ready_hook()
    assert session.calls == ["monarch-jupyter-attach"]


def test_pre_upgrade_status_without_workers_local_judges_by_the_pid_keys(tmp_path):
    """A status.json written before ``workers_local`` existed: PIDs keyed ``<mesh>_<i>`` are
    local workers (re-attaching, checked in /proc); PIDs keyed by host are not (attaching)."""
    session = StandInSession(tmp_path)
    write_cache(tmp_path, {"w": os.getpid()}, local=None)
    status = json.loads((tmp_path / ".monarch/default/status.json").read_text())
    assert "workers_local" not in status
    line = _warmup.begin(session)
    assert line.startswith(
        "monarch_jupyter: re-attaching to context 'default': ProcessJob 0123abcd, hosts×1 (1 live)"
    )
    session.ready_hook()

    other = StandInSession(tmp_path / "ssh")
    write_cache(tmp_path / "ssh", {"w": os.getpid()}, local=None, keys=["node1"])
    assert _warmup.begin(other) == (
        "monarch_jupyter: attaching to the cached job of context 'default' in the background; %job shows it"
    )
    other.ready_hook()


@pytest.mark.parametrize("content", [b"", b"\x80\x04\x95garbage"])
def test_cache_refused_before_unpickling_takes_the_synchronous_path(tmp_path, content):
    def refuse():
        raise CacheError("state.pkl is corrupt; it was left as it is")

    session = StandInSession(tmp_path, attach=refuse)
    state = write_cache(tmp_path, {"w": os.getpid()})
    state.write_bytes(content)
    line = _warmup.begin(session)
    assert line == "monarch_jupyter: state.pkl is corrupt; it was left as it is"
    assert session.ready_hook is None and session.calls == [threading.current_thread().name]


class _Events:
    def __init__(self):
        self.callbacks: dict[str, list] = {"pre_run_cell": [], "post_run_cell": []}

    def register(self, name, fn):
        self.callbacks[name].append(fn)

    def unregister(self, name, fn):
        self.callbacks[name].remove(fn)

    def trigger(self, name):
        for fn in list(self.callbacks[name]):
            fn(None)


def _wait_for(predicate, limit=5.0):
    deadline = time.monotonic() + limit
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


def test_with_ipython_the_attach_starts_after_the_cell(tmp_path):
    class Shell:
        events = _Events()

    session = StandInSession(tmp_path)
    write_cache(tmp_path, {"w": os.getpid()})
    _warmup.begin(session, Shell())
    time.sleep(0.2)
    assert session.calls == [], "nothing starts before the cell ends"
    Shell.events.trigger("post_run_cell")
    assert _wait_for(lambda: session.calls == ["monarch-jupyter-attach"])
    Shell.events.trigger("pre_run_cell")
    Shell.events.trigger("post_run_cell")
    assert Shell.events.callbacks == {"pre_run_cell": [], "post_run_cell": []}, "done: no more hooks"


def test_the_attach_waits_while_a_cell_runs_unless_it_is_needed(tmp_path, monkeypatch):
    monkeypatch.setattr(_warmup, "HOLD_MAX", 0.6)

    class Shell:
        events = _Events()

    session = StandInSession(tmp_path)
    write_cache(tmp_path, {"w": os.getpid()})
    _warmup.begin(session, Shell())
    Shell.events.trigger("post_run_cell")  # the loading cell ends
    Shell.events.trigger("pre_run_cell")  # the next starts before START_DELAY passed
    time.sleep(0.3)
    assert session.calls == [], "a short cell is not slowed by the attach"
    assert _wait_for(lambda: session.calls == ["monarch-jupyter-attach"], 2), "a long cell is overlapped"

    second = StandInSession(tmp_path)
    _warmup.begin(second, Shell())
    Shell.events.trigger("post_run_cell")
    Shell.events.trigger("pre_run_cell")
    second.ready_hook()  # a command needs the job: at once
    assert second.calls == ["monarch-jupyter-attach"]


def test_interrupted_wait_is_one_line_and_the_attach_goes_on(tmp_path):
    release = threading.Event()
    session = StandInSession(tmp_path, attach=lambda: (release.wait(10), JobStatus("default", RUNNING))[1])
    write_cache(tmp_path, {"w": os.getpid()})
    _warmup.begin(session)
    threading.Timer(0.2, _thread.interrupt_main).start()
    with pytest.raises(_warmup.AttachInterrupted) as caught:
        session.ready_hook()
    assert isinstance(caught.value, KeyboardInterrupt)
    shown = caught.value._render_traceback_()
    assert len(shown) == 1 and "context 'default'" in shown[0] and "run the cell again" in shown[0]
    assert session.ready_hook is not None, "still attaching: the next command waits again"
    release.set()
    session.ready_hook()
    assert session.calls == ["monarch-jupyter-attach"]


def test_status_json_is_read_without_following_links_or_reading_huge_files(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (2 << 20))
    assert _local_records.read_json(big) is None
    target = tmp_path / "t.json"
    target.write_text(json.dumps({"state": RUNNING}))
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert _local_records.read_json(link) is None
    assert _local_records.read_json(target) == {"state": RUNNING}


def test_a_context_switch_waits_for_the_background_attach_first(tmp_path):
    from monarch_jupyter.jobs.facade import JobContext

    session = JobContext(loop=object(), cwd=lambda: str(tmp_path))
    Layout(tmp_path).ensure()
    seen = []
    session.ready_hook = lambda: seen.append(session.layout.current())
    session.create("other")
    session.use("other")  # its attach finds no job: nothing imported, nothing connected
    assert seen and seen[0] == "default", "the hook runs before the symlink moves"


def test_after_runs_on_the_attach_thread_once_attached_and_nothing_waits_for_it(tmp_path):
    """The composition root's ``after`` (the %%remote actors' spawn) runs once the job is
    attached, on the attach thread, after a command waiting for the attach was let go."""

    def attach():
        session.attached = True  # what a real attach leaves behind
        return JobStatus("default", RUNNING)

    session = StandInSession(tmp_path, attach=attach)
    write_cache(tmp_path, {"w": os.getpid()})
    release, ran = threading.Event(), []

    def after():
        ran.append(threading.current_thread().name)
        release.wait(5)

    _warmup.begin(session, after=after)
    waited = threading.Thread(target=session.ready_hook)
    waited.start()
    waited.join(2)
    assert not waited.is_alive(), "a command waits for the attach, not for after()"
    deadline = time.monotonic() + 5
    while not ran and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ran == ["monarch-jupyter-attach"]
    release.set()


def test_after_is_skipped_when_the_attach_left_no_job(tmp_path):
    session = StandInSession(tmp_path)  # attach() finds no job: attached stays False
    write_cache(tmp_path, {"w": os.getpid()})
    ran = []
    _warmup.begin(session, after=lambda: ran.append(1))
    session.ready_hook()
    time.sleep(0.2)
    assert ran == []
