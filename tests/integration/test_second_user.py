"""#18 cases with a real second Unix user on this machine (created and removed by the fixture)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

import pytest


@pytest.fixture
def shared_tmp():
    """A sticky, world-writable temporary folder, as /tmp is (the kernel's TMPDIR)."""
    folder = Path(tempfile.mkdtemp(prefix="mj-shared-tmp-", dir="/tmp"))
    os.chmod(folder, 0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("planted", ["folder", "symlink"])
def test_a_runs_folder_another_user_made_first_is_not_used(
    start_kernel, second_user, shared_tmp, tmp_path, planted
):
    name = shared_tmp / f"monarch_jupyter-runs-{os.getuid()}"
    theirs = shared_tmp / "theirs"
    assert second_user.run("mkdir", "-m", "777", str(theirs)).returncode == 0
    if planted == "folder":
        made = second_user.run("mkdir", "-m", "777", str(name))
    else:
        made = second_user.run("ln", "-s", str(theirs), str(name))
    assert made.returncode == 0, made.stderr
    cache = tmp_path / "cache"
    k = start_kernel(env={"TMPDIR": str(shared_tmp), "XDG_CACHE_HOME": str(cache)})
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=1")
    out = k.ok("%remote echo hello-from-rank").text
    assert "hello-from-rank" in out, out
    runs = cache / "monarch_jupyter" / "runs"
    assert stat.S_IMODE(runs.stat().st_mode) == 0o700 and runs.stat().st_uid == os.getuid()
    assert [p for p in runs.iterdir() if not p.name.startswith(".")], "the run is in the private fallback"
    assert list(theirs.iterdir()) == [] and (planted == "symlink" or list(name.iterdir()) == [])
    k.ok("%job kill")


def test_remote_stop_signals_only_our_own_processes(start_kernel, second_user, tag):
    import re
    import subprocess

    from harness import poll

    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=1")
    run_id = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{6})", k.ok("%%remote --detach\nsleep 300").text).group(1)
    # another user's process carrying our run's marker in its environment
    stranger = subprocess.Popen(second_user.command("env", f"MONARCH_JUPYTER_RUN={run_id}", "sleep", "301"))
    try:
        time.sleep(0.3)
        stopped = k.ok(f"%remote stop {run_id}").text
        assert "stopped" in stopped, stopped
        time.sleep(1.0)
        assert stranger.poll() is None, "another user's process was signalled"
        assert "stopped" in k.ok("%remote runs").text
    finally:
        stranger.kill()
        stranger.wait()
    k.ok("%job kill")
    assert poll(lambda: stranger.poll() is not None, 5)


MONARCH_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from monarch_jupyter.runtime import monarch_log as _monarch_log
line = _monarch_log.secure()
print("LINE", line, flush=True)
from monarch.actor import this_host
procs = this_host().spawn_procs(per_host={{"gpus": 1}})
print("LOG", _monarch_log.log_path(), flush=True)
"""


@pytest.mark.parametrize("folder_owner", ["victim", "stranger"])
def test_monarch_log_does_not_follow_a_planted_symlink(second_user, shared_tmp, folder_owner):
    """The victim is the second user here (root plays the neighbour): its /tmp/<name>/ exists
    before it ever ran Monarch, with monarch_log.log a link to a file of the victim's."""
    victim_file = shared_tmp / "victim-notes"
    victim_file.write_text("precious\n")
    os.chown(victim_file, second_user.uid, second_user.gid)
    folder = Path("/tmp") / second_user.name
    folder.mkdir(mode=0o777)
    try:
        os.chmod(folder, 0o777)
        if folder_owner == "victim":
            os.chown(folder, second_user.uid, second_user.gid)
        (folder / "monarch_log.log").symlink_to(victim_file)
        script = shared_tmp / "victim.py"
        script.write_text(MONARCH_SCRIPT.format(root=str(Path(__file__).parents[2])))
        os.chmod(script, 0o644)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(shared_tmp)}
        import sys as _sys

        done = second_user.run(_sys.executable, str(script), env=env, cwd=str(shared_tmp), timeout=120)
        assert "LOG" in done.stdout, done.stdout + done.stderr
        assert victim_file.read_text() == "precious\n", "Monarch's log followed the planted link"
        log = Path(done.stdout.split("LOG ", 1)[1].split()[0])
        assert log.is_file() and not log.is_symlink() and log.stat().st_uid == second_user.uid
        if folder_owner == "victim":
            assert "LINE None" in done.stdout
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and log.name == "monarch_log.log"
        else:
            assert "is not a folder of yours" in done.stdout and log.name != "monarch_log.log"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
