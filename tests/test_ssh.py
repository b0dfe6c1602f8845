"""SSHJob from a notebook against a real sshd on loopback (tests/daemons.py).

Hosts 127.0.0.2 and 127.0.0.3 are two "machines" served by one sshd; every
session carries the test's tag (sshd's SetEnv), so remote workers are found and
reaped like local ones. Real kernels drive %job and %%remote.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from daemons import free_port
from harness import tagged_pids

HOSTS = ("127.0.0.2", "127.0.0.3")


def remote_workers(tag: str) -> list[int]:
    """Worker Pythons started over ssh (not the local ssh clients): their cmdline starts with python."""
    found = []
    for pid in tagged_pids(tag):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"run_worker_loop_forever" in b" ".join(argv) and b"python" in argv[0]:
            found.append(pid)
    return found


def ssh_clients(tag: str) -> list[int]:
    found = []
    for pid in tagged_pids(tag):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"ssh") and b"run_worker_loop_forever" in b" ".join(argv):
            found.append(pid)
    return found


def write_jobs(folder: Path, sshd, python: str = sys.executable, port: int | None = None,
               tty: bool = True, name: str = "jobs", config: Path | None = None) -> int:
    port = port or free_port()
    sshd.ports_used.add(port)
    args = (("-tt",) if tty else ()) + ("-F", str(config or sshd.ssh_config))
    (folder / f"{name}.py").write_text(
        "from monarch._src.job.job import SSHJob\n"
        f"ssh2 = SSHJob(python_exe={python!r}, ssh_args={args!r}, monarch_port={port})\n"
        f"ssh2.add_mesh('hosts', {list(HOSTS)!r})\n"
    )
    return port


def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_ssh_job_end_to_end(sshd, start_kernel, tag, workdir):
    write_jobs(workdir, sshd)
    kernel = start_kernel()
    kernel.ok("%load_ext monarch_jupyter")
    applied = kernel.ok("%job apply jobs.ssh2", timeout=120)
    assert "applied: context 'default': SSHJob hosts×2 (2 live)" in applied.text, applied.text
    assert "Traceback" not in applied.text and "PanicException" not in applied.text
    assert len(remote_workers(tag)) == 2

    status = kernel.ok("%job")
    assert "hosts: 2 hosts, 2 live workers" in status.text, status.text

    run = kernel.ok("%%remote bash\necho host=$(hostname) rank=$MONARCH_RANK_hosts; sleep 0.2; echo done", timeout=120)
    for rank in (0, 1):
        assert re.search(rf"\[hosts={rank}\].*host=.* rank={rank}", run.text), run.text
    assert run.text.count("done") >= 2

    # interrupt: a long command on both hosts stops, nothing stays
    started = time.monotonic()
    msg_holder = {}

    def on_output(out):
        if "tick" in str(out.content) and "t" not in msg_holder:
            msg_holder["t"] = time.monotonic()
            kernel.interrupt()

    long = kernel.execute("%%remote bash\nwhile true; do echo tick; sleep 0.2; done", timeout=60, on_output=on_output)
    assert long.error is not None and long.error["ename"] in ("KeyboardInterrupt", "RemoteInterrupted"), long.text
    assert time.monotonic() - started < 30
    assert wait_for(lambda: not any(b"sleep" in Path(f"/proc/{p}/cmdline").read_bytes()
                                    for p in tagged_pids(tag) if Path(f"/proc/{p}").exists()), 5)

    # restart the kernel: re-attach over the right transport, %%remote still works
    kernel.km.restart_kernel(now=True)
    kernel.kc.wait_for_ready(timeout=60)
    loaded = kernel.ok("%load_ext monarch_jupyter", timeout=120)
    assert "re-attached to context 'default': SSHJob" in loaded.text, loaded.text
    again = kernel.ok("%%remote bash\necho back $MONARCH_RANK_hosts", timeout=120)
    assert "back 0" in again.text and "back 1" in again.text, again.text

    killed = kernel.ok("%job kill", timeout=60)
    assert "killed the job of context 'default'" in killed.text, killed.text
    assert wait_for(lambda: not remote_workers(tag) and not ssh_clients(tag), 10), (remote_workers(tag), ssh_clients(tag))
