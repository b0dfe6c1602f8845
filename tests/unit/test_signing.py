"""#18.2: the signature beside each job cache and the key it is made with."""

from __future__ import annotations

import os
import pickle
import stat

import pytest

from monarch_jupyter.errors import CacheError
from monarch_jupyter.jobs import cache
from monarch_jupyter.jobs import signing as _signing


@pytest.fixture(autouse=True)
def config(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config" / "monarch_jupyter"


class Boom:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_key_is_made_private_on_first_use_and_kept(config, tmp_path):
    path = tmp_path / "state.pkl"
    path.write_bytes(b"data")
    _signing.sign(path, b"data")
    key = config / _signing.KEY_NAME
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and stat.S_IMODE(config.stat().st_mode) == 0o700
    first = key.read_bytes()
    assert _signing.check(path, b"data") is None and key.read_bytes() == first
    assert "does not match" in _signing.check(path, b"other")


def test_unsigned_cache_is_not_unpickled_until_trusted(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "state.pkl"
    path.write_bytes(pickle.dumps(Boom(marker)))
    path.chmod(0o600)
    with pytest.raises(cache.UntrustedCacheError, match=r"no signature.*`%job trust` accepts it"):
        cache.load_job(path)
    assert not marker.exists()
    # the deliberate step runs the pickle (the user vouched for it); what is not a job is not signed
    with pytest.raises(cache.UnreadableCacheError, match=r"does not unpickle into a job.*nothing changed"):
        cache.trust(path)
    assert marker.exists() and not _signing.sig_path(path).exists()
    with pytest.raises(cache.UntrustedCacheError, match="no signature"):  # as it was before
        cache.load_job(path)


def test_trusting_a_truncated_cache_changes_nothing(tmp_path):
    path = tmp_path / "state.pkl"
    path.write_bytes(pickle.dumps({"a": 1})[:-3])
    path.chmod(0o600)
    with pytest.raises(cache.UnreadableCacheError, match="does not unpickle into a job"):
        cache.trust(path)
    assert not _signing.sig_path(path).exists()


def test_a_key_others_can_read_is_refused(config, tmp_path):
    path = tmp_path / "state.pkl"
    _signing.sign(path, b"x")
    (config / _signing.KEY_NAME).chmod(0o644)
    with pytest.raises(CacheError, match="readable or owned by someone else"):
        _signing.check(path, b"x")


def test_remove_and_quarantine_drop_the_signature(tmp_path):
    path = tmp_path / "state.pkl"
    path.write_bytes(b"\x80\x04garbage")
    _signing.sign(path, path.read_bytes())
    cache.quarantine(path)
    assert not _signing.sig_path(path).exists()


def test_an_unwritable_config_folder_is_one_line(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(blocker))  # a file where the folder should be
    with pytest.raises(CacheError, match="set XDG_CONFIG_HOME to a private folder"):
        _signing.sign(tmp_path / "state.pkl", b"x")
