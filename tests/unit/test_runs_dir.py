"""#18.14: the runs folder's name taken by someone else: a private fallback, never theirs."""

from __future__ import annotations

import os
import stat

import pytest

from monarch_jupyter.remote.host import layout as L


@pytest.fixture
def places(tmp_path, monkeypatch):
    monkeypatch.delenv(L.RUNS_DIR_ENV, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(L.tempfile, "tempdir", None)
    (tmp_path / "tmp").mkdir()
    return tmp_path / "tmp" / f"monarch_jupyter-runs-{os.getuid()}", tmp_path / "cache/monarch_jupyter/runs"


def test_default_when_free_or_ours(places):
    default, _ = places
    assert L.runs_root() == default and stat.S_IMODE(default.stat().st_mode) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_a_foreign_or_linked_default_falls_back(places, tmp_path):
    default, fallback = places
    default.mkdir(mode=0o777)
    os.chown(default, 65534, 65534)
    assert L.runs_root() == fallback and stat.S_IMODE(fallback.stat().st_mode) == 0o700
    os.rmdir(default)
    default.symlink_to(tmp_path)
    assert L.runs_path() == fallback


def test_ours_but_open_is_tightened_or_refused_with_its_fix(places):
    default, _ = places
    default.mkdir()
    os.chmod(default, 0o755)
    assert L.runs_root() == default and stat.S_IMODE(default.stat().st_mode) == 0o700
    os.chmod(default, 0o777)
    with pytest.raises(RuntimeError, match=r"chmod 700.*MONARCH_JUPYTER_RUNS_DIR"):
        L.runs_root()
