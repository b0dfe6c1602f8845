"""A job cache our kernels did not write is never unpickled (real kernels, real workers)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from harness import TAG_VAR, usage_error, worker_pids
from harness import poll as wait_for


class _Touch:
    """Unpickling this creates ``path``: the proof that a cache ran."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _foreign_cache(workdir: Path, marker: Path) -> Path:
    """A ``.monarch/`` as a git clone or tarball leaves it: ours by owner and mode, unsigned."""
    import pickle

    ctx = workdir / ".monarch" / "default"
    ctx.mkdir(parents=True)
    (workdir / ".monarch" / "job_state.pkl").symlink_to("default/state.pkl")
    state = ctx / "state.pkl"
    state.write_bytes(pickle.dumps(_Touch(marker)))
    state.chmod(0o600)
    return state


def test_a_foreign_cache_runs_nothing_and_says_how_to_accept_it(start_kernel, workdir, tag):
    marker = workdir / "pwned"
    state = _foreign_cache(workdir, marker)
    k = start_kernel()
    loaded = k.ok("%load_ext monarch_jupyter").text.strip()
    assert len(loaded.splitlines()) == 1, loaded
    assert "state.pkl was not written by your kernels (it has no signature; owner " in loaded
    assert "`%job trust` accepts it" in loaded
    for line in ("%job", "%job reconnect"):  # `%job apply SPEC` and `%job kill` move it aside
        assert "was not written by your kernels" in usage_error(k.execute(line)), line
    # a signature that does not match is the same refusal
    state.with_name("state.pkl.sig").write_text("0" * 64 + "\n")
    assert "does not match its signature" in usage_error(k.execute("%job"))
    time.sleep(0.5)
    assert not marker.exists() and worker_pids(tag) == []
    assert state.exists()  # left as it is
    state.unlink()
    assert "no job cache to trust in context 'default'" in usage_error(k.execute("%job trust"))


def test_a_cache_the_monarch_cli_rewrote_works_after_one_job_trust(start_kernel, workdir, tag):
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=1")
    state = workdir / ".monarch/default/state.pkl"
    assert (workdir / ".monarch/default/state.pkl.sig").exists()
    pids = worker_pids(tag)
    assert len(pids) == 1
    # Monarch's own code rewrites the cache (as `monarch apply` does): no signature
    os.unlink(state.with_name("state.pkl.sig"))
    code = "from monarch.job import job_load; j = job_load('.monarch/job_state.pkl'); j.dump('.monarch/job_state.pkl')"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=workdir, env={**os.environ, TAG_VAR: tag}, timeout=120
    )
    assert done.returncode == 0
    k.restart()
    loaded = k.ok("%load_ext monarch_jupyter").text
    assert "was not written by your kernels" in loaded and "%job trust" in loaded
    trusted = k.ok("%job trust").text
    assert "trusted .monarch/default/state.pkl (owner " in trusted and "signed as yours" in trusted
    assert "live" in trusted.splitlines()[1], trusted
    assert "1 live" in k.ok("%job").text or "running" in k.ok("%job").text
    k.restart()  # signed now: a new kernel attaches without asking
    assert "not written by your kernels" not in k.ok("%load_ext monarch_jupyter").text
    k.ok("%job kill")
    assert wait_for(lambda: not worker_pids(tag), 10)
    assert not state.with_name("state.pkl.sig").exists()
