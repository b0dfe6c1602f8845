"""#18.5: `.monarch/` removed or renamed while the job runs: it is still seen and stopped."""

from __future__ import annotations

import shutil

from harness import poll as wait_for
from harness import usage_error, worker_pids


def test_removed_cache_keeps_the_job_in_this_kernel_and_kill_stops_it(start_kernel, workdir, tag):
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=2")
    assert len(worker_pids(tag)) == 2
    shutil.rmtree(workdir / ".monarch")
    shown = k.ok("%job").text
    assert "the cache .monarch/default/state.pkl vanished" in shown and "%job kill stops" in shown, shown
    assert "running" in shown
    assert "killed the job of context 'default'" in k.ok("%job kill").text
    assert wait_for(lambda: not worker_pids(tag), 10)
    assert "no job to kill" in usage_error(k.execute("%job kill"))


def test_renamed_cache_then_a_new_kernel_finds_and_stops_the_workers(start_kernel, workdir, tag):
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=2")
    pids = sorted(worker_pids(tag))
    assert len(pids) == 2
    (workdir / ".monarch").rename(workdir / "moved-away")
    k.restart()
    loaded = k.ok("%load_ext monarch_jupyter").text
    assert "workers of a job whose cache is gone still run" in loaded, loaded
    shown = k.ok("%job").text
    assert "workers of a job whose cache is gone still run" in shown and "%job kill stops them" in shown
    assert sorted(worker_pids(tag)) == pids  # nothing was stopped by looking
    killed = k.ok("%job kill").text
    assert "stopped 2 worker(s) of a job whose cache was gone" in killed, killed
    assert wait_for(lambda: not worker_pids(tag), 10)
    assert "whose cache is gone" not in k.ok("%job").text
