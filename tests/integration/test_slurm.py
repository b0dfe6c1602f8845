"""monarch_jupyter.slurm.SlurmJob from a notebook against a real single-node Slurm 22.05.

The daemons (tests/daemons.py) run on loopback with every file in the test's
temp folder; kernels get SLURM_CONF so sbatch/squeue/scancel talk to them.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from pathlib import Path

from daemons import free_port
from harness import worker_pids


def write_jobs(folder: Path, port: int, exclusive: bool = False) -> None:
    (folder / "sjobs.py").write_text(
        "from monarch_jupyter.slurm import SlurmJob\n"
        f"one = SlurmJob({{'hosts': 1}}, python_exe={sys.executable!r}, monarch_port={port}, "
        f"exclusive={exclusive}, log_dir={str(folder / 'slurm-logs')!r})\n"
    )


def test_normalise_22_05_record():
    from monarch_jupyter.jobs.engines.slurm_job import normalise

    old = {
        "job_id": 7,
        "job_state": "RUNNING",
        "job_resources": {"nodes": "vm", "allocated_nodes": [{"nodename": "vm", "cpus_used": 0}]},
    }
    new = normalise(old)
    assert new["job_state"] == ["RUNNING"]
    assert new["job_resources"]["nodes"]["allocation"] == [{"name": "vm"}]
    newer = {
        "job_id": 7,
        "job_state": ["RUNNING"],
        "job_resources": {"nodes": {"allocation": [{"name": "n1"}]}},
    }
    assert normalise(newer)["job_resources"]["nodes"]["allocation"] == [{"name": "n1"}]


def test_slurm_job_end_to_end(slurm, start_kernel, tag, workdir):
    write_jobs(workdir, free_port())
    kernel = start_kernel(env=slurm.env)
    kernel.ok("%load_ext monarch_jupyter")
    applied = kernel.ok("%job apply sjobs.one", timeout=180)
    assert "applied: context 'default': SlurmJob hosts×1" in applied.text, applied.text
    assert "Submitting SLURM job" not in applied.text and "Traceback" not in applied.text
    assert len(slurm.queue()) == 1 and "RUNNING" in slurm.queue()[0]

    run = kernel.ok("%%remote bash\necho rank=$MONARCH_RANK_hosts slurm=$SLURM_JOB_ID", timeout=120)
    assert re.search(r"rank=0 slurm=\d+", run.text), run.text

    kernel.km.restart_kernel(now=True)
    kernel.kc.wait_for_ready(timeout=60)
    loaded = kernel.ok("%load_ext monarch_jupyter", timeout=120)
    assert "attaching to the cached job of context 'default' in the background" in loaded.text, loaded.text
    attached = kernel.ok("%job", timeout=120)
    assert "SlurmJob" in attached.text and "running" in attached.text, attached.text
    again = kernel.ok("%%remote bash\necho back", timeout=120)
    assert "back" in again.text, again.text

    killed = kernel.ok("%job kill", timeout=60)
    assert "killed the job of context 'default'" in killed.text, killed.text
    deadline = time.monotonic() + 15
    while slurm.queue() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert slurm.queue() == []


def test_interrupted_pending_apply_leaves_empty_queue(slurm, start_kernel, tag, workdir):
    blocker = slurm._client("sbatch", "--exclusive", "--wrap", "sleep 300")
    assert "Submitted batch job" in blocker.stdout, blocker.stderr
    blocker_id = blocker.stdout.split()[-1]
    write_jobs(workdir, free_port(), exclusive=True)
    kernel = start_kernel(env=slurm.env)
    kernel.ok("%load_ext monarch_jupyter")
    seen = {}

    def on_output(out):
        if "queued as Slurm job" in json.dumps(out.content) and "t" not in seen:
            seen["t"] = time.monotonic()
            seen["text"] = out.content.get("text", "")
            threading.Timer(0.5, kernel.interrupt).start()

    result = kernel.execute("%job apply sjobs.one", timeout=120, on_output=on_output)
    assert "t" in seen, result.text
    assert result.error is not None and result.error["ename"] == "Interrupted", result.text
    assert time.monotonic() - seen["t"] < 0.5 + 2.5
    ids = [line.split()[0] for line in slurm.queue()]
    assert ids == [blocker_id], slurm.queue()
    assert not (workdir / ".monarch/default/state.pkl").exists()
    assert not worker_pids(tag)


CLIENT = """\
import os, sys, time
from monarch.job import job_load
job = job_load(".monarch/job_state.pkl")  # the BatchJob Monarch wrote for this allocation
state = job.state(cached_path=None)
print("client in", os.environ.get("SLURM_JOB_ID"), "meshes", sorted(state._hosts), flush=True)
for i in range(int(os.environ.get("STEPS", "3"))):
    print("step", i, flush=True)
    time.sleep(0.3)
"""


def test_slurm_batch_script(slurm, start_kernel, tag, workdir):
    write_jobs(workdir, free_port())
    (workdir / "client.py").write_text(CLIENT)
    kernel = start_kernel(env=slurm.env)
    kernel.ok("%load_ext monarch_jupyter")
    started = kernel.ok("%job batch client.py sjobs.one", timeout=120)
    match = re.search(r"batch run (\S+) started: client.py \(Slurm job (\d+)\)", started.text)
    assert match, started.text
    run_id, job_id = match.groups()
    assert not (workdir / ".monarch/job_state.pkl").exists()  # the context's cache was not touched
    followed = kernel.ok(f"%job logs {run_id} --follow", timeout=180)
    assert f"client in {job_id} meshes ['hosts']" in followed.text, followed.text + "".join(
        p.read_text() for p in (workdir / ".monarch/default/batch" / run_id).glob("*.err")
    )
    assert "step 2" in followed.text and "ended" in followed.text, followed.text
    deadline = time.monotonic() + 15
    while slurm.queue() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert slurm.queue() == []

    # a long one is stopped by %job kill ID: scancel, the queue empties
    kernel.ok("import os; os.environ['STEPS'] = '600'")
    long = kernel.ok("%job batch client.py sjobs.one", timeout=120)
    long_id = re.search(r"batch run (\S+) started", long.text).group(1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "step 1" not in kernel.ok(f"%job logs {long_id}").text:
        time.sleep(0.5)
    assert "running" in kernel.ok("%job").text
    killed = kernel.ok(f"%job kill {long_id}", timeout=60)
    assert f"batch run {long_id}: killed" in killed.text, killed.text
    deadline = time.monotonic() + 15
    while slurm.queue() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert slurm.queue() == []
