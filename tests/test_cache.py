import os
import pickle
import stat

import pytest

from monarch_jupyter import cache
from monarch_jupyter.errors import CacheError


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
    with pytest.raises(CacheError, match="belongs to uid 65534"):
        cache.load_job(path)


@pytest.mark.parametrize("data", [b"", b"\x80\x04garbage", None])
def test_corrupt_or_truncated_is_reported_and_left_alone(tmp_path, job, data):
    path = tmp_path / "state.pkl"
    if data is None:  # truncated real pickle
        data = pickle.dumps(job)[:-20]
    path.write_bytes(data)
    path.chmod(0o600)
    with pytest.raises(CacheError) as info:
        cache.load_job(path)
    assert "left as it is" in str(info.value)
    assert path.read_bytes() == data


def test_not_a_job_is_refused(tmp_path):
    path = tmp_path / "state.pkl"
    path.write_bytes(pickle.dumps({"a": 1}))
    path.chmod(0o600)
    with pytest.raises(CacheError, match="not a Monarch job"):
        cache.load_job(path)
