"""A plain run's actors found again by the next kernel of the job, with a real kernel restarted
and real ``--local hosts=2`` workers: the first ``%%remote`` after the restart runs in the same
procs (no spawn), and they are found in the background after ``%load_ext`` before any cell asks;
a new allocation spawns its own. Every test reaps what carries its tag."""

from __future__ import annotations

import re

from harness import poll

# the run shell is the leader its actor's proc started: its parent is that proc
PROCS = "%%remote bash\necho proc $PPID"
WARM = (
    "_r = get_ipython().magics_manager.registry['RemoteMagics'].session.remote_runner\n"
    "print('WARM', 0 if _r is None else len(_r._warm))"
)


def procs(text: str) -> dict[str, int]:
    return {label: int(pid) for label, pid in re.findall(r"^\[(hosts=\d)\]\s+proc (\d+)$", text, re.M)}


def test_the_next_kernel_runs_in_the_procs_the_last_one_spawned(start_kernel):
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=2")
    before = procs(k.ok(PROCS).text)
    assert sorted(before) == ["hosts=0", "hosts=1"], before
    k.restart()
    k.ok("%load_ext monarch_jupyter")
    r = k.ok(PROCS)  # at once: waits for the attach, then finds them
    assert procs(r.text) == before, r.text
    assert "2 ok" in r.text
    k.restart()
    k.ok("%load_ext monarch_jupyter")
    # found on the attach thread, before any cell asks for them
    found = poll(lambda: "WARM 1" in k.ok(WARM).text, 60, 0.2)
    assert found, k.ok(WARM).text
    assert procs(k.ok(PROCS).text) == before
    k.ok("%job kill")
    k.ok("%job apply --local hosts=2")  # another allocation: its own procs
    after = procs(k.ok(PROCS).text)
    assert sorted(after) == ["hosts=0", "hosts=1"] and not set(after.values()) & set(before.values())
    k.ok("%job kill")
