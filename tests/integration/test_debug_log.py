"""The one debug switch: ``MONARCH_JUPYTER_DEBUG=1`` at ``%load_ext`` (or ``%job debug``) shows
monarch_jupyter's records at its decisions and Monarch's own, in the cell; off, neither."""

from __future__ import annotations

import re

OURS = re.compile(r"DEBUG monarch_jupyter\.\S+: ")
MONARCH = re.compile(r"^.*\bmonarch\.(?!_jupyter)\S*.*$|^Found cached job|^Applying current job", re.M)


def test_the_switch_at_load_shows_both(start_kernel):
    kernel = start_kernel(env={"MONARCH_JUPYTER_DEBUG": "1"})
    kernel.ok("%load_ext monarch_jupyter")
    applied = kernel.ok("%job apply --local hosts=1", timeout=180).stream("stderr")
    assert "apply policy: no previous job" in applied, applied
    assert "start: ProcessJob with LocalEngine" in applied, applied
    run = kernel.ok("%remote true").stream("stderr")
    assert re.search(r"run \S+ starts on mesh hosts", run) and re.search(
        r"run \S+ ended: 1 ranks ended, 0 failed", run
    ), run
    assert all(OURS.search(line) for line in run.splitlines() if "monarch_jupyter" in line)
    kernel.ok("%job kill")
    applied_again = kernel.ok("%job apply --local hosts=1", timeout=180).stream("stderr")
    assert MONARCH.search(applied + applied_again), applied + applied_again  # Monarch's own records pass too
    kernel.ok("%job debug off")
    assert kernel.ok("%remote true").stream("stderr") == ""
    kernel.ok("%job kill")


def test_off_by_default_and_on_from_the_magic(kernel):
    assert "monarch_jupyter" not in kernel.ok("%job apply --local hosts=1", timeout=180).stream("stderr")
    assert "monarch_jupyter" not in kernel.ok("%remote true").stream("stderr")
    kernel.ok("%job debug on")
    assert "apply policy: previous ProcessJob alive=True can_run=True: reused" in kernel.ok(
        "%job apply --local hosts=1"
    ).stream("stderr")
    kernel.ok("%job kill")
