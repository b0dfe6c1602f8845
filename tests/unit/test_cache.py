import os
import pickle
import stat

import pytest

from monarch_jupyter.errors import CacheError
from monarch_jupyter.jobs import cache
from monarch_jupyter.jobs import signing as _signing


class Boom:
    def __reduce__(self):
        return (os.system, ("touch should-not-exist",))


@pytest.fixture
def job():
    from monarch.job import ProcessJob

    return ProcessJob({"hosts": 1})


def test_dump_writes_0600_through_symlink(tmp_path, job):
    (tmp_path / "ctx").mkdir()
    link = tmp_path / "job_state.pkl"
    link.symlink_to("ctx/state.pkl")
    cache.dump_job(job, link)
    real = tmp_path / "ctx" / "state.pkl"
    assert link.is_symlink()
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    loaded = cache.load_job(link)
    assert loaded._meshes == {"hosts": 1}


def test_group_writable_file_is_refused_before_unpickling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "state.pkl"
    path.write_bytes(pickle.dumps(Boom()))
    path.chmod(0o664)
    with pytest.raises(CacheError, match="writable by group/others"):
        cache.load_job(path)
    assert not (tmp_path / "should-not-exist").exists()


def test_world_writable_folder_is_refused(tmp_path, job):
    folder = tmp_path / "shared"
    folder.mkdir()
    cache.dump_job(job, folder / "state.pkl")
    folder.chmod(0o777)
    with pytest.raises(CacheError, match="chmod go-w"):
        cache.load_job(folder / "state.pkl")


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a file away")
def test_file_of_another_user_is_refused(tmp_path, job):
    path = tmp_path / "state.pkl"
    cache.dump_job(job, path)
    os.chown(path, 65534, -1)
    with pytest.raises(cache.ForeignCacheError, match=r"belongs to another user \(owner .*moves it aside"):
        cache.load_job(path)


@pytest.mark.parametrize("data", [b"", b"\x80\x04garbage", None])
def test_corrupt_or_truncated_is_reported_and_left_alone(tmp_path, job, data):
    path = tmp_path / "state.pkl"
    if data is None:  # truncated real pickle
        data = pickle.dumps(job)[:-20]
    path.write_bytes(data)
    path.chmod(0o600)
    _signing.sign(path, data)  # our own file, corrupted: not a question of trust
    with pytest.raises(CacheError) as info:
        cache.load_job(path)
    assert "left as it is" in str(info.value)
    assert path.read_bytes() == data


def test_not_a_job_is_refused(tmp_path):
    path = tmp_path / "state.pkl"
    path.write_bytes(pickle.dumps({"a": 1}))
    path.chmod(0o600)
    _signing.sign(path, path.read_bytes())
    with pytest.raises(CacheError, match="not a Monarch job"):
        cache.load_job(path)


# ── hostile files, recovery, the lock ───────────────────────────
def _within(seconds, fn, *args):
    """Run fn in a thread; fail (instead of hanging the suite) if it blocks."""
    import threading

    box = {}

    def run():
        try:
            box["value"] = fn(*args)
        except BaseException as error:  # handed back to the test, whatever it is
            box["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{fn.__name__} blocked for {seconds} s"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def test_fifo_state_is_refused_without_blocking(tmp_path):
    monarch = tmp_path / ".monarch" / "default"
    monarch.mkdir(parents=True)
    os.mkfifo(monarch / "state.pkl", 0o600)
    with pytest.raises(CacheError, match="a FIFO, not a regular file"):
        _within(5, cache.load_job, monarch / "state.pkl")


def test_symlinked_state_to_a_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "pipe", 0o600)
    (tmp_path / "state.pkl").symlink_to("pipe")
    with pytest.raises(CacheError, match="FIFO"):
        _within(5, cache.load_job, tmp_path / "state.pkl")


def test_huge_state_is_refused(tmp_path, monkeypatch):
    from monarch_jupyter.system import files as _files

    monkeypatch.setattr(_files, "PICKLE_BYTES", 1000)
    path = tmp_path / "state.pkl"
    path.write_bytes(b"x" * 2000)
    path.chmod(0o600)
    with pytest.raises(CacheError, match="2000 bytes, more than"):
        cache.load_job(path)


def test_every_folder_from_dot_monarch_down_is_checked(tmp_path, job):
    """.monarch/ 0777 with a fine context folder and file: still refused (StrictModes)."""
    ctx = tmp_path / ".monarch" / "default"
    ctx.mkdir(parents=True)
    cache.dump_job(job, ctx / "state.pkl")
    ctx.chmod(0o700)
    (tmp_path / ".monarch").chmod(0o777)
    with pytest.raises(CacheError, match=r"\.monarch is writable by group/others \(mode 777\)"):
        cache.load_job(ctx / "state.pkl")
    (tmp_path / ".monarch").chmod(0o755)
    assert cache.load_job(ctx / "state.pkl")._meshes == {"hosts": 1}


@pytest.mark.parametrize("data", [b"", b"\x80\x04garbage"])
def test_unreadable_cache_is_its_own_error_and_quarantine_keeps_it(tmp_path, data):
    path = tmp_path / "state.pkl"
    path.write_bytes(data)
    path.chmod(0o600)
    _signing.sign(path, data)
    with pytest.raises(cache.UnreadableCacheError, match="moves it aside"):
        cache.load_job(path)
    moved = cache.quarantine(path)
    assert not path.exists() and moved.parent == tmp_path
    assert moved.name.startswith("state.pkl.unreadable-") and moved.read_bytes() == data
    path.write_bytes(data)
    assert cache.quarantine(path) != moved  # a second one never overwrites the first


def test_lock_serialises_processes_and_is_reentrant(tmp_path):
    import subprocess
    import sys
    import time

    monarch = tmp_path / ".monarch"
    with cache.locked(monarch):
        with cache.locked(monarch):  # re-entrant: kill inside remove
            pass
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys, time; from monarch_jupyter.jobs import cache\n"
                f"with cache.locked({str(monarch)!r}): print(time.monotonic(), flush=True)",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.0)
        released = time.monotonic()
    out, _ = child.communicate(timeout=30)
    assert float(out) >= released  # the other process got the lock only after we let go
    assert stat.S_IMODE((monarch / ".lock").stat().st_mode) == 0o600


def test_lock_refuses_a_fifo(tmp_path):
    monarch = tmp_path / ".monarch"
    monarch.mkdir()
    os.mkfifo(monarch / ".lock")

    def take():
        with cache.locked(monarch):
            pass

    with pytest.raises(CacheError, match="FIFO"):
        _within(5, take)
