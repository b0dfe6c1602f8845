"""The JobContext facade over a real folder, with fake jobs and no Monarch workers."""

from __future__ import annotations

import pytest

from fake_jobs import LOG, FakeJob
from monarch_jupyter.errors import MonarchJupyterError
from monarch_jupyter.jobs.facade import JobContext
from monarch_jupyter.jobs.specs.base import VariableSpec
from monarch_jupyter.jobs.status import RUNNING
from monarch_jupyter.runtime import chatter as _quiet


class InlineLoop:
    def call(self, fn, *args, timeout=None):
        return fn(*args)


@pytest.fixture
def session(tmp_path, monkeypatch):
    monkeypatch.setattr(_quiet, "start_client_context", lambda: None)
    LOG.clear()
    return JobContext(loop=InlineLoop(), cwd=lambda: str(tmp_path))


def apply(session, job):
    return session.apply(VariableSpec("j"), namespace={"j": job})


def test_apply_records_then_replaces(session, tmp_path):
    first = apply(session, FakeJob("a"))
    assert first.changed and first.status.state == RUNNING and first.status.attached
    assert "lives only in this kernel" in first.note
    cache = tmp_path / ".monarch/default/state.pkl"
    assert cache.exists()
    assert not apply(session, FakeJob("a")).changed  # the running job can run it
    LOG.clear()
    second = apply(session, FakeJob("b"))
    assert second.replaced_apply_id == first.status.apply_id
    assert LOG == [("start", "b"), ("kill", "a")]
    assert session.status().apply_id == second.status.apply_id


def test_failed_start_keeps_the_old_job_and_its_cache(session, tmp_path):
    apply(session, FakeJob("a"))
    cache = tmp_path / ".monarch/default/state.pkl"
    before = cache.read_bytes()
    with pytest.raises(MonarchJupyterError, match="scheduler said no"):
        apply(session, FakeJob("b", fail="scheduler said no"))
    assert cache.read_bytes() == before
    assert ("kill", "a") not in LOG
    assert session.job().name == "a"


def test_a_kill_that_fails_keeps_the_cache(session, tmp_path):
    apply(session, FakeJob("a", kill_fails="host unreachable"))
    with pytest.raises(MonarchJupyterError, match=r"host unreachable.*cache was kept"):
        session.kill()
    assert (tmp_path / ".monarch/default/state.pkl").exists()


def test_a_foreign_cache_change_drops_the_attachment(session, tmp_path):
    apply(session, FakeJob("a"))
    assert session.attached
    session.job().kill()  # as `monarch kill` does: the workers, then the cache
    (tmp_path / ".monarch/default/state.pkl").unlink()
    assert not session.attached
    assert session.status().state == "no job"


def test_a_vanished_cache_keeps_a_live_job_attached_and_killable(session, tmp_path):
    import shutil

    apply(session, FakeJob("a"))
    job = session.job()
    shutil.rmtree(tmp_path / ".monarch")  # rm -rf .monarch: the workers still run (#18.5)
    assert session.attached
    assert "vanished" in (session.status().note or "")
    session.kill()
    assert not job.alive and not session.attached


def test_the_attachment_check_rereads_only_what_changed(session, tmp_path, monkeypatch):
    """Every %%remote run checks the attachment: while nothing moved, that is a
    fingerprint of two stats, not a readlink + resolve + stamp; any move is seen."""
    from monarch_jupyter.jobs.contexts import Layout
    from monarch_jupyter.jobs.store import JobStore

    apply(session, FakeJob("a"))
    reads = []
    real_current = Layout.current
    monkeypatch.setattr(Layout, "current", lambda self: reads.append(1) or real_current(self))
    assert session.attached and session.context == "default"
    assert reads == []  # nothing changed since the apply recorded it
    # another kernel (or the CLI) replaces the cache: seen, the attachment lapses
    other = FakeJob("b")
    other.state()  # started by the other kernel
    JobStore(Layout(tmp_path)).save("default", other, None)
    assert not session.attached and reads
    assert session.job().name == "b"  # re-attached from the new cache
    reads.clear()
    assert session.attached and reads == []
    # `monarch context use other` from a terminal: the link is replaced
    Layout(tmp_path).use("other")
    assert session.context == "other" and not session.attached
    Layout(tmp_path).use("default")
    assert session.context == "default"
    session.job()
    # %cd elsewhere and back
    elsewhere = tmp_path / "sub"
    elsewhere.mkdir()
    monkeypatch.setattr(session, "_cwd", lambda: str(elsewhere))
    assert not session.attached and session.context == "default"


def test_a_new_session_has_no_remote_runner_yet(session):
    """remote.runner.runner_for makes it on first use and keeps it here."""
    assert session.remote_runner is None
    session.remote_runner = marker = object()
    assert session.remote_runner is marker
