"""A cache this kernel will not use never traps the notebook (real kernels, real workers):
`%job apply SPEC` and `%job kill` move it aside, keep its bytes, unpickle nothing, and go on."""

from __future__ import annotations

import os
import pickle
import random
from pathlib import Path

import pytest

from harness import usage_error, worker_pids


class _Touch:
    """Unpickling this creates ``path``: the proof that a cache ran."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _plant(workdir: Path, data: bytes, signature: str | None = None) -> Path:
    """``.monarch/default/state.pkl`` holding ``data``, ours by owner and mode; a ``signature``
    line beside it when given (a stale one: it matches nothing)."""
    ctx = workdir / ".monarch" / "default"
    ctx.mkdir(parents=True)
    (workdir / ".monarch" / "job_state.pkl").symlink_to("default/state.pkl")
    state = ctx / "state.pkl"
    state.write_bytes(data)
    state.chmod(0o600)
    if signature is not None:
        state.with_name("state.pkl.sig").write_text(signature)
    spec = ctx / "spec"  # as `monarch apply` of the CLI leaves it: what a bare %job apply re-applies
    spec.write_text("monarch_jupyter.local_jobs.hosts_1\n")
    spec.chmod(0o600)
    return state


def _marker_pickle(marker: Path, truncate: int = 0) -> bytes:
    data = pickle.dumps(_Touch(marker))
    return data[: len(data) - truncate] if truncate else data


CASES = {
    "unsigned": lambda marker: (_marker_pickle(marker), None),
    "truncated unsigned": lambda marker: (_marker_pickle(marker, truncate=5), None),
    "truncated, stale signature": lambda marker: (_marker_pickle(marker, truncate=5), "0" * 64 + "\n"),
    "empty": lambda marker: (b"", None),
    "random bytes": lambda marker: (random.Random(7).randbytes(300), None),
}


def _moved(workdir: Path) -> list[Path]:
    return sorted((workdir / ".monarch" / "default").glob("state.pkl.unreadable-*"))


@pytest.mark.parametrize("case", list(CASES))
def test_apply_spec_moves_an_unusable_cache_aside_and_starts(case, start_kernel, workdir, tag):
    marker = workdir / "pwned"
    data, signature = CASES[case](marker)
    _plant(workdir, data, signature)
    k = start_kernel()
    loaded = k.ok("%load_ext monarch_jupyter").text.strip()
    assert len(loaded.splitlines()) == 1, loaded
    bare = usage_error(k.execute("%job apply"))  # it would re-apply through the cache
    assert "Give the spec to apply, e.g. %job apply monarch_jupyter.local_jobs.hosts_1" in bare, bare
    assert len(bare.splitlines()) == 1, bare
    assert _moved(workdir) == []
    out = k.ok("%job apply --local hosts=1").text
    assert "moved the unusable .monarch/default/state.pkl (owner root" in out, out
    assert "aside to .monarch/default/state.pkl.unreadable-" in out, out
    assert "none of yours is recorded running" in out, out
    (moved,) = _moved(workdir)
    assert moved.read_bytes() == data  # the old bytes, kept beside it
    assert len(worker_pids(tag)) == 1 and "running" in k.ok("%job").text
    assert not marker.exists()  # nothing was unpickled
    k.ok("%job kill")
    assert worker_pids(tag) == []


def test_kill_moves_an_unsigned_cache_aside_and_stops_only_recorded_workers(start_kernel, workdir, tag):
    marker = workdir / "pwned"
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=1")
    (pid,) = worker_pids(tag)
    state = workdir / ".monarch/default/state.pkl"
    state.write_bytes(_marker_pickle(marker))  # rewritten by someone else: no valid signature
    k.restart()
    k.ok("%load_ext monarch_jupyter")
    out = k.ok("%job kill").text
    # the cache was not read; the workers were found in this user's own live record
    assert "moved the unusable .monarch/default/state.pkl" in out, out
    assert f"stopped 1 worker(s) your own record of it listed: pid {pid}" in out, out
    assert worker_pids(tag) == [] and not marker.exists()
    assert len(_moved(workdir)) == 1 and not state.exists()


def test_trust_of_a_cache_that_does_not_unpickle_changes_nothing(start_kernel, workdir):
    state = _plant(workdir, random.Random(3).randbytes(64))
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    line = usage_error(k.execute("%job trust"))
    assert "does not unpickle into a job" in line and "nothing changed" in line, line
    assert len(line.splitlines()) == 1
    assert state.exists() and not state.with_name("state.pkl.sig").exists() and _moved(workdir) == []


def test_another_users_cache_is_moved_aside_unread(start_kernel, workdir, tag, second_user):
    marker = workdir / "pwned"
    state = _plant(workdir, _marker_pickle(marker))
    os.chown(state, second_user.uid, second_user.gid)
    k = start_kernel()
    loaded = k.ok("%load_ext monarch_jupyter").text.strip()
    assert "belongs to another user (owner " + second_user.name in loaded, loaded
    out = k.ok("%job apply --local hosts=1").text
    assert f"moved the unusable .monarch/default/state.pkl (owner {second_user.name}" in out, out
    (moved,) = _moved(workdir)
    assert moved.stat().st_uid == second_user.uid  # kept as it was, theirs
    assert len(worker_pids(tag)) == 1 and not marker.exists()
    k.ok("%job kill")
