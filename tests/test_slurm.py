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
    from monarch_jupyter.slurm import normalise

    old = {"job_id": 7, "job_state": "RUNNING",
           "job_resources": {"nodes": "vm", "allocated_nodes": [{"nodename": "vm", "cpus_used": 0}]}}
    new = normalise(old)
    assert new["job_state"] == ["RUNNING"]
    assert new["job_resources"]["nodes"]["allocation"] == [{"name": "vm"}]
    newer = {"job_id": 7, "job_state": ["RUNNING"], "job_resources": {"nodes": {"allocation": [{"name": "n1"}]}}}
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
    assert "re-attached to context 'default': SlurmJob" in loaded.text, loaded.text
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
    assert result.error is not None and result.error["ename"] == "KeyboardInterrupt", result.text
    assert time.monotonic() - seen["t"] < 0.5 + 2.5
    ids = [line.split()[0] for line in slurm.queue()]
    assert ids == [blocker_id], slurm.queue()
    assert not (workdir / ".monarch/default/state.pkl").exists()
    assert not worker_pids(tag)
