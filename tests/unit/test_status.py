"""Statuses as plain data, and their publication to views and status.json."""

from __future__ import annotations

import logging

from monarch_jupyter.jobs.contexts import Layout
from monarch_jupyter.jobs.status import NO_JOB, NOT_RUNNING, RUNNING, WORKERS_DEAD, StatusBoard, describe


class Job:
    def __init__(self, running=True, alive=True):
        self._running = self if running else None
        self.alive = alive
        self.apply_id = "abc"

    def _is_running(self):
        return self.alive


def test_describe_reads_condition_and_cache(tmp_path):
    path = tmp_path / ".monarch/default/state.pkl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"x")
    status = describe("default", Job(), None, state_path=path, root=tmp_path, spec="mod.job")
    assert (status.state, status.job_class, status.apply_id, status.spec) == (
        RUNNING,
        "Job",
        "abc",
        "mod.job",
    )
    assert status.cache_path == ".monarch/default/state.pkl" and status.applied_at and not status.attached
    assert (
        describe("d", Job(alive=False), None, state_path=path, root=tmp_path, spec=None).state == WORKERS_DEAD
    )
    assert (
        describe("d", Job(running=False), None, state_path=path, root=tmp_path, spec=None).state
        == NOT_RUNNING
    )
    none = describe("d", None, None, state_path=tmp_path / "missing", root=tmp_path, spec="s")
    assert (none.state, none.spec, none.cache_path) == (NO_JOB, "s", None)


def test_a_broken_view_is_reported_once_and_others_still_hear(tmp_path, caplog):
    layout = Layout(tmp_path)
    layout.ensure()
    board = StatusBoard()
    heard = []

    def broken(status):
        raise KeyError("widget gone")

    board.add_listener(broken)
    unsubscribe = board.add_listener(heard.append)
    status = describe("default", None, None, state_path=tmp_path / "none", root=tmp_path, spec=None)
    with caplog.at_level(logging.WARNING, logger="monarch_jupyter.jobs.status"):
        board.publish(layout, status)
    assert heard == [status]
    assert [r.getMessage().rsplit("] ", 1)[-1] for r in caplog.records] == [
        "monarch_jupyter: a status view failed: KeyError: 'widget gone'"
    ]
    assert (tmp_path / ".monarch/default/status.json").exists()
    unsubscribe()
    board.publish(layout, status)
    assert len(heard) == 1


def test_an_unwritable_status_file_does_not_stop_the_lifecycle(tmp_path, caplog):
    class ReadOnly(Layout):
        def write_status(self, name, data):
            raise PermissionError(13, "Permission denied")

    layout = ReadOnly(tmp_path)
    layout.ensure()
    heard = []
    board = StatusBoard()
    board.add_listener(heard.append)
    status = describe("default", None, None, state_path=tmp_path / "none", root=tmp_path, spec=None)
    with caplog.at_level(logging.WARNING, logger="monarch_jupyter.jobs.status"):
        board.publish(layout, status)
    assert heard == [status]
    assert "could not write status.json" in caplog.text


def test_plain_data_and_views_import_neither_session_monarch_nor_ipython():
    """Views read statuses from status.py; it, the specs and the engines load without the
    session facade, Monarch or IPython (so they stay cheap and testable alone)."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "import monarch_jupyter.jobs.formatting, monarch_jupyter.jobs.status, monarch_jupyter.jobs.specs.parse\n"
        "import monarch_jupyter.jobs.engines\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('monarch', 'IPython', 'ipywidgets')\n"
        "      or m == 'monarch_jupyter.jobs.facade'))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
