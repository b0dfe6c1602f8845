"""The apply policy with fake jobs: start the new job, record it, then kill the old one."""

from __future__ import annotations

import pytest

from monarch_jupyter.errors import MonarchJupyterError
from monarch_jupyter.jobs import lifecycle
from monarch_jupyter.runtime import chatter as _quiet


class FakeJob:
    """Duck-types what lifecycle and _introspect use of a JobTrait; logs every step."""

    def __init__(
        self, name, log, *, running=False, alive=True, meshes=(("hosts", 2),), fail=None, kill_fails=None
    ):
        self.name, self.log, self.alive, self.meshes = name, log, alive, meshes
        self.fail, self.kill_fails = fail, kill_fails
        self._running = self if running else None
        self.apply_id = f"id-{name}" if running else None

    def state(self, cached_path):
        assert cached_path is None, "Monarch must stay off our cache file"
        self.log.append(("start", self.name))
        if self.fail is not None:
            raise self.fail
        self._running, self.apply_id = self, f"id-{self.name}"
        return f"state-{self.name}"

    def _is_running(self):
        return self.alive

    def can_run(self, spec):
        return spec.meshes == self.meshes

    def kill(self):
        self.log.append(("kill", self.name))
        if self.kill_fails is not None:
            raise self.kill_fails
        self._running = None


class Panic(BaseException):
    """Like Monarch's PanicException, which is not an Exception."""


@pytest.fixture(autouse=True)
def no_client_context(monkeypatch):
    monkeypatch.setattr(_quiet, "start_client_context", lambda: None)


def call(fn, *args):
    return fn(*args)


def run(new, old, log, commit_error=None):
    def commit(state):
        log.append(("commit", state))
        if commit_error is not None:
            raise commit_error

    return lifecycle.replace(new, old, label="the spec", call=call, commit=commit)


def test_new_job_starts_and_is_recorded_before_the_old_is_killed():
    log = []
    old, new = FakeJob("old", log, running=True), FakeJob("new", log)
    done = run(new, old, log)
    assert log == [("start", "new"), ("commit", "state-new"), ("kill", "old")]
    assert (done.state, done.replaced_apply_id, done.kill_failed) == ("state-new", "id-old", None)


@pytest.mark.parametrize("error", [RuntimeError("scheduler said no"), Panic("scheduler said no")])
def test_failed_start_leaves_the_old_job_and_records_nothing(error):
    log = []
    old, new = FakeJob("old", log, running=True), FakeJob("new", log, fail=error)
    with pytest.raises(MonarchJupyterError) as info:
        run(new, old, log)
    message = str(info.value)
    assert "scheduler said no" in message and "left as they were" in message and "\n" not in message
    # the half-started new job is reaped; the old one is never touched, nothing is recorded
    assert log == [("start", "new"), ("kill", "new")]
    assert old._running is old


def test_failed_cleanup_of_a_failed_start_is_said():
    log = []
    new = FakeJob("new", log, fail=RuntimeError("no"), kill_fails=OSError("scancel missing"))
    with pytest.raises(
        MonarchJupyterError, match="reaping what it started also failed: OSError: scancel missing"
    ):
        run(new, None, log)


def test_failed_commit_stops_the_new_job_and_keeps_the_old():
    log = []
    old, new = FakeJob("old", log, running=True), FakeJob("new", log)
    with pytest.raises(MonarchJupyterError) as info:
        run(new, old, log, commit_error=OSError("disk full"))
    assert "could not be recorded (OSError: disk full)" in str(info.value)
    assert log == [("start", "new"), ("commit", "state-new"), ("kill", "new")]


def test_failed_kill_of_the_old_job_is_returned_not_raised():
    log = []
    old = FakeJob("old", log, running=True, kill_fails=RuntimeError("host unreachable"))
    done = run(FakeJob("new", log), old, log)
    assert done.kill_failed == "RuntimeError: host unreachable"
    assert ("commit", "state-new") in log


def test_an_old_job_that_never_ran_is_not_killed():
    log = []
    done = run(FakeJob("new", log), FakeJob("old", log), log)
    assert ("kill", "old") not in log and done.replaced_apply_id is None


def test_reusable_needs_a_live_job_that_can_run_the_spec():
    log = []
    spec = FakeJob("spec", log)
    assert lifecycle.reusable(FakeJob("a", log, running=True), spec)
    assert not lifecycle.reusable(None, spec)
    assert not lifecycle.reusable(FakeJob("b", log), spec)  # not running
    assert not lifecycle.reusable(FakeJob("c", log, running=True, alive=False), spec)
    assert not lifecycle.reusable(FakeJob("d", log, running=True, meshes=(("hosts", 3),)), spec)

    class OtherVersion(FakeJob):
        def can_run(self, spec):
            raise AttributeError("'SSHJob' object has no attribute '_transport'")

    assert not lifecycle.reusable(OtherVersion("e", log, running=True), spec)


class RecordingFeature(lifecycle.features.Feature):
    """A service that logs its steps; ``frees`` says whether it can unblock a failed kill."""

    def __init__(self, log, refuse=None, frees=False):
        self.log, self.refuse, self.frees = log, refuse, frees

    def refusal(self, job, workers_local):
        return self.refuse

    def before_state(self, job, applying):
        self.log.append(("before_state", job.name, applying))

    def after_state(self, job):
        self.log.append(("after_state", job.name))

    def unblock_kill(self, job, workers_local, error):
        self.log.append(("unblock", str(error)))
        if self.frees:
            job.kill_fails = None
        return self.frees

    def after_kill(self, apply_id):
        self.log.append(("after_kill", apply_id))
        raise RuntimeError("housekeeping never fails a kill")


def test_every_feature_sees_each_step_of_a_start_and_a_kill(monkeypatch):
    log = []
    monkeypatch.setattr(lifecycle, "FEATURES", (RecordingFeature(log, frees=True),))
    job = FakeJob("new", log, kill_fails=RuntimeError("mount busy"))
    assert lifecycle.start(job) == "state-new"
    lifecycle.kill(job)
    assert log == [
        ("before_state", "new", True),
        ("start", "new"),
        ("after_state", "new"),
        ("kill", "new"),
        ("unblock", "mount busy"),
        ("kill", "new"),  # asked again once a feature freed what held it
        ("after_kill", "id-new"),
    ]


def test_a_kill_no_feature_can_unblock_raises(monkeypatch):
    log = []
    monkeypatch.setattr(lifecycle, "FEATURES", (RecordingFeature(log),))
    with pytest.raises(RuntimeError, match="stuck"):
        lifecycle.kill(FakeJob("old", log, running=True, kill_fails=RuntimeError("stuck")))
    assert log == [("kill", "old"), ("unblock", "stuck")]


def test_a_feature_refusal_starts_nothing(monkeypatch):
    log = []
    monkeypatch.setattr(
        lifecycle.features, "FEATURES", (RecordingFeature(log, refuse="one admin per process"),)
    )
    with pytest.raises(lifecycle.StartFailed, match="one admin per process"):
        lifecycle.start(FakeJob("new", log))
    assert log == []
