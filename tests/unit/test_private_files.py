"""Everything we create under ``.monarch/`` is private (0700 folders, 0600 files) whatever the umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from monarch_jupyter.actors.output import Log
from monarch_jupyter.jobs.contexts import Layout
from monarch_jupyter.remote.run.index import RunEntry
from monarch_jupyter.remote.run.spool import Spool
from monarch_jupyter.system import files as _files


@pytest.fixture
def loose_umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


def loose(root: Path) -> list[str]:
    """Every path under ``root`` (itself included) that is not 0700 (folder) / 0600 (file)."""
    found = []
    for path in [root, *root.rglob("*")]:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            continue
        want = 0o700 if stat.S_ISDIR(info.st_mode) else 0o600
        if stat.S_IMODE(info.st_mode) != want:
            found.append(f"{path.relative_to(root.parent)} {stat.S_IMODE(info.st_mode):o}")
    return found


def test_everything_made_under_dot_monarch_is_private(tmp_path, loose_umask):
    layout = Layout(tmp_path)
    layout.ensure()
    layout.create("other")
    layout.use("third")
    layout.write_spec("default", "monarch_jupyter.local_jobs.hosts_2")
    layout.write_status("default", {"state": "running"})
    runs = _files.private_dir(layout.context_dir("default") / "runs")
    spool = Spool(runs / "r1.log", ["hosts=0"])
    spool.write(0, "out", "a token\n")
    spool.close()
    RunEntry(
        id="r1",
        path=str(runs / "r1.json"),
        command="echo",
        mode="cmd",
        target="hosts",
        started=0.0,
        host_dir="/tmp/x",
        ranks=[],
    ).save()
    actors = _files.private_dir(layout.context_dir("default") / "actors")
    log = Log(str(actors / "a.log"))
    log.flush()
    assert loose(layout.dir) == []


def test_an_existing_folder_of_ours_is_tightened_one_others_can_write_is_left_to_the_trust_check(
    tmp_path, loose_umask
):
    (tmp_path / ".monarch" / "default").mkdir(parents=True)  # as an older release or the CLI made it
    (tmp_path / ".monarch").chmod(0o755)
    Layout(tmp_path).write_status("default", {})
    assert stat.S_IMODE((tmp_path / ".monarch").stat().st_mode) == 0o700
    (tmp_path / ".monarch").chmod(0o777)
    Layout(tmp_path).write_status("default", {})
    assert stat.S_IMODE((tmp_path / ".monarch").stat().st_mode) == 0o777  # check_trusted reports it
    (tmp_path / ".monarch").chmod(0o700)


def test_a_file_that_was_readable_is_made_private_when_reopened(tmp_path, loose_umask):
    path = tmp_path / ".monarch" / "x.log"
    path.parent.mkdir()
    path.write_text("old")
    path.chmod(0o644)
    with open(path, "a", opener=_files.private_opener) as f:
        f.write("more")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_own_private_dir_makes_checks_and_tightens(tmp_path):
    made = _files.own_private_dir(tmp_path / "a" / "b")
    assert made.is_dir() and stat.S_IMODE(made.stat().st_mode) == 0o700
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    os.chmod(loose, 0o755)
    _files.own_private_dir(loose)
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700
    os.chmod(loose, 0o777)
    with pytest.raises(_files.NotYoursError, match="can be written by others"):
        _files.own_private_dir(loose, refuse_shared=True)
    (tmp_path / "link").symlink_to(loose)
    (tmp_path / "file").write_text("")
    for planted in ("link", "file"):
        with pytest.raises(_files.NotYoursError, match="not a folder of yours"):
            _files.own_private_dir(tmp_path / planted)
    assert stat.S_IMODE(loose.stat().st_mode) == 0o777  # a refused folder is left as it was
