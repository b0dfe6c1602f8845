"""#18.5: the record of live workers outside the project folder."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from monarch_jupyter.system import live as _live


@pytest.fixture(autouse=True)
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_record_find_stop_forget(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        _live.record(str(tmp_path), "default", "a1", {"hosts_0": child.pid})
        assert stat.S_IMODE(_live.live_dir().stat().st_mode) == 0o700
        found = _live.find(str(tmp_path), "default")
        assert found is not None and found.alive() == [child.pid]
        assert "%job kill stops them" in _live.orphan_note(found)
        assert _live.find(str(tmp_path), "other") is None
        assert _live.stop(found) == [child.pid]
        assert child.wait(5) is not None
        assert _live.find(str(tmp_path), "default") is None
    finally:
        child.kill()
        child.wait()


def test_a_doctored_record_signals_nothing(tmp_path):
    _live.record(str(tmp_path), "default", "a1", {"hosts_0": os.getpid()})
    path = next(_live.live_dir().iterdir())
    data = json.loads(path.read_text())
    data["workers"] = [[1, 12345], [os.getpid(), 1]]  # init, and us with another start time
    path.write_text(json.dumps(data))
    found = _live.find(str(tmp_path), "default")
    assert found is not None and found.alive() == [] and _live.stop(found) == []
