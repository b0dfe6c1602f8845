"""%job batch / logs / kill ID in a real kernel: batch scripts never touch the active context's cache."""

from __future__ import annotations

import re
import stat
import time
from pathlib import Path

from harness import tagged_pids

TRAIN = """\
import os, sys, time
from monarch.job import LocalJob
state = LocalJob().state()  # batch mode: finds the BatchJob in .monarch/job_state.pkl of its folder
print("connected", sorted(state._hosts), "cwd-is-run-folder", os.path.exists(".monarch/job_state.pkl"), flush=True)
print("notebook", os.environ["MONARCH_JUPYTER_NOTEBOOK_DIR"], flush=True)
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 600):
    print("step", i, flush=True)
    time.sleep(0.3)
"""


def test_batch_run_logs_follow_and_kill(kernel, tag, workdir):
    kernel.ok("%job apply --local hosts=1", timeout=120)
    cache = workdir / ".monarch/default/state.pkl"
    before = cache.read_bytes()
    (workdir / "train.py").write_text(TRAIN)

    started = kernel.ok("%job batch train.py", timeout=60)
    match = re.search(r"batch run (b[\d-]+-[0-9a-f]{4}) started", started.text)
    assert match, started.text
    run_id = match.group(1)
    log = workdir / f".monarch/default/batch/{run_id}/output.log"
    assert str(log.relative_to(workdir)) in started.text

    arrivals = []

    def on_output(out):
        if out.msg_type == "stream" and "step" in out.content["text"]:
            arrivals.append(out.t)
            if len(arrivals) == 4:
                kernel.interrupt()

    followed = kernel.execute(f"%job logs {run_id} --follow", timeout=60, on_output=on_output)
    assert followed.error is None, followed.text
    assert "connected ['hosts'] cwd-is-run-folder True" in followed.text, followed.text
    assert f"notebook {workdir}" in followed.text
    assert "stopped following" in followed.text
    assert arrivals[-1] - arrivals[0] > 0.5, arrivals  # streamed live, not at the end

    status = kernel.ok("%job")
    assert re.search(rf"batch\s+{run_id}\s+running", status.text), status.text
    assert "ProcessJob" in status.text and "hosts: 1 hosts, 1 live workers" in status.text, status.text
    assert cache.read_bytes() == before  # the active context's cache is untouched
    assert (workdir / ".monarch/job_state.pkl").resolve() == cache.resolve()

    pid = int(re.search(r"\(pid (\d+)\)", started.text).group(1))
    killed = kernel.ok(f"%job kill {run_id}", timeout=30)
    assert f"batch run {run_id}: killed" in killed.text, killed.text
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(
        b"train.py" in Path(f"/proc/{p}/cmdline").read_bytes()
        for p in tagged_pids(tag)
        if Path(f"/proc/{p}").exists()
    ):
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists() or b"train.py" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert "killed" in kernel.ok("%job").text

    # a short run ends by itself: its log and exit state are kept
    (workdir / "short.py").write_text("print('short done', flush=True)\n")
    short = kernel.ok("%job batch short.py")
    short_id = re.search(r"batch run (\S+) started", short.text).group(1)
    done = kernel.ok(f"%job logs {short_id} --follow", timeout=60)
    assert "short done" in done.text and "exited 0" in done.text, done.text
    # private whatever the umask: the folders 0700, what we write 0600
    batch = workdir / ".monarch/default/batch"
    for folder in (batch, batch / run_id, batch / short_id, batch / short_id / ".monarch"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for name in (f"{run_id}/killed", f"{short_id}/output.log", f"{short_id}/run.json", f"{short_id}/rc"):
        assert stat.S_IMODE((batch / name).stat().st_mode) == 0o600, name

    bad = kernel.execute("%job logs b20990101-000000-ffff")
    assert "no batch run" in bad.text and "Traceback" not in bad.text, bad.text
    kernel.ok("%job kill")
