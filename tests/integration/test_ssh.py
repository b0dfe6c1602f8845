"""SSHJob from a notebook against a real sshd on loopback (tests/daemons.py).

Hosts 127.0.0.2 and 127.0.0.3 are two "machines" served by one sshd; every
session carries the test's tag (sshd's SetEnv), so remote workers are found and
reaped like local ones. Real kernels drive %job and %%remote.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from daemons import free_port
from harness import poll, tagged_pids

HOSTS = ("127.0.0.2", "127.0.0.3")


def _argv_pids(tag: str, match) -> list[int]:
    """Tagged processes whose argv (a list of bytes) satisfies ``match``."""
    found = []
    for pid in tagged_pids(tag):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and match(argv):
            found.append(pid)
    return found


def remote_workers(tag: str) -> list[int]:
    """Worker Pythons started over ssh (not the local ssh clients): their cmdline starts with python."""
    return _argv_pids(
        tag, lambda argv: b"run_worker_loop_forever" in b" ".join(argv) and b"python" in argv[0]
    )


def ssh_clients(tag: str) -> list[int]:
    return _argv_pids(
        tag, lambda argv: argv[0].endswith(b"ssh") and b"run_worker_loop_forever" in b" ".join(argv)
    )


def write_jobs(
    folder: Path,
    sshd,
    python: str = sys.executable,
    port: int | None = None,
    tty: bool = True,
    name: str = "jobs",
    config: Path | None = None,
) -> int:
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
    return bool(poll(predicate, timeout, 0.1))


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

    run = kernel.ok(
        "%%remote bash\necho host=$(hostname) rank=$MONARCH_RANK_hosts; sleep 0.2; echo done", timeout=120
    )
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

    long = kernel.execute(
        "%%remote bash\nwhile true; do echo tick; sleep 0.2; done", timeout=60, on_output=on_output
    )
    assert long.error is not None and long.error["ename"] in ("KeyboardInterrupt", "RemoteInterrupted"), (
        long.text
    )
    assert time.monotonic() - started < 30
    assert wait_for(
        lambda: (
            not any(
                b"sleep" in Path(f"/proc/{p}/cmdline").read_bytes()
                for p in tagged_pids(tag)
                if Path(f"/proc/{p}").exists()
            )
        ),
        5,
    )

    # restart the kernel: re-attach over the right transport, %%remote still works
    kernel.km.restart_kernel(now=True)
    kernel.kc.wait_for_ready(timeout=60)
    loaded = kernel.ok("%load_ext monarch_jupyter", timeout=120)
    assert "attaching to the cached job of context 'default' in the background" in loaded.text, loaded.text
    attached = kernel.ok("%job", timeout=120)
    assert "SSHJob" in attached.text and "hosts: 2 hosts, 2 live workers" in attached.text, attached.text
    again = kernel.ok("%%remote bash\necho back $MONARCH_RANK_hosts", timeout=120)
    assert "back 0" in again.text and "back 1" in again.text, again.text

    killed = kernel.ok("%job kill", timeout=60)
    assert "killed the job of context 'default'" in killed.text, killed.text
    assert wait_for(lambda: not remote_workers(tag) and not ssh_clients(tag), 10), (
        remote_workers(tag),
        ssh_clients(tag),
    )


def one_line_error(result) -> str:
    text = result.text
    assert "Traceback" not in text and "PanicException" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("UsageError: ")]
    assert len(errors) == 1, text
    return errors[0]


def log_named(line: str, workdir: Path) -> str:
    match = re.search(r"\(log: (\S+?)\)", line)
    assert match, line
    path = Path(match.group(1))
    path = path if path.is_absolute() else workdir / path
    assert path.is_file() and path.parent.parent.name == ".monarch", path
    return path.read_text()


def test_worker_python_without_monarch_jupyter(sshd, start_kernel, tag, workdir, tmp_path):
    """%%remote works where only torchmonarch is installed: our actor travels by value."""
    shadow = tmp_path / "shadow" / "monarch_jupyter"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'monarch_jupyter'\", name='monarch_jupyter')\n"
    )
    wrapper = tmp_path / "python-no-mj"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={shadow.parent} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    write_jobs(workdir, sshd, python=str(wrapper))
    kernel = start_kernel()
    kernel.ok("%load_ext monarch_jupyter")
    kernel.ok("%job apply jobs.ssh2", timeout=120)
    proof = kernel.ok(f"%%remote bash\n{wrapper} -c 'import monarch_jupyter' 2>&1 | tail -1", timeout=120)
    assert "No module named 'monarch_jupyter'" in proof.text, proof.text
    run = kernel.ok("%%remote python\nimport os; print('pid', os.getpid())", timeout=120)
    assert run.text.count("pid ") == 2, run.text
    kernel.ok("%job kill", timeout=60)
    assert wait_for(lambda: not remote_workers(tag) and not ssh_clients(tag), 10)


def test_apply_failures_are_one_line_and_leave_nothing(sshd, start_kernel, tag, workdir, tmp_path):
    write_jobs(workdir, sshd)
    write_jobs(workdir, sshd, python="/usr/bin/python3", name="nomonarch")
    strict = sshd.client_config(tmp_path / "strict_config", strict=True)
    write_jobs(workdir, sshd, name="hostkey", config=strict)
    (workdir / "unreachable.py").write_text(
        "from monarch._src.job.job import SSHJob\n"
        f"ssh2 = SSHJob(python_exe={sys.executable!r}, ssh_args=('-tt', '-F', {str(sshd.ssh_config)!r}), monarch_port={free_port()})\n"
        "ssh2.add_mesh('hosts', ['127.0.0.2', '127.0.0.4'])\n"
    )
    kernel = start_kernel()
    kernel.ok("%load_ext monarch_jupyter")
    kernel.ok("%job apply jobs.ssh2", timeout=120)
    cache = workdir / ".monarch/default/state.pkl"
    before = cache.read_bytes()
    workers = sorted(remote_workers(tag))
    assert len(workers) == 2

    failed = kernel.execute("%job apply nomonarch.ssh2", timeout=120)
    line = one_line_error(failed)
    assert "127.0.0.2" in line and "/usr/bin/python3" in line and "cannot import monarch" in line, line
    assert "ModuleNotFoundError" in log_named(line, workdir)

    failed = kernel.execute("%job apply hostkey.ssh2", timeout=120)
    line = one_line_error(failed)
    assert "ssh to 127.0.0.2 failed" in line and "host key" in line, line
    assert "Host key verification failed" in log_named(line, workdir)

    failed = kernel.execute("%job apply unreachable.ssh2", timeout=120)
    line = one_line_error(failed)
    assert "ssh to 127.0.0.4 failed" in line and "unreachable" in line, line

    skew = tmp_path / "skew"
    skew.mkdir()
    (skew / "sitecustomize.py").write_text(
        "import importlib.metadata as m\n"
        "_real = m.version\n"
        "m.version = lambda name: '0.0.1' if name == 'torchmonarch' else _real(name)\n"
    )
    skewed = tmp_path / "python-skew"
    skewed.write_text(f'#!/bin/sh\nPYTHONPATH={skew} exec {sys.executable} "$@"\n')
    skewed.chmod(0o755)
    write_jobs(workdir, sshd, python=str(skewed), name="skewed")
    failed = kernel.execute("%job apply skewed.ssh2", timeout=120)
    line = one_line_error(failed)
    assert "127.0.0.2" in line and str(skewed) in line and "torchmonarch 0.0.1" in line, line

    dying = tmp_path / "python-dies"
    dying.write_text(
        "#!/bin/sh\ncase \"$2\" in *run_worker_loop_forever*) echo 'worker boom' >&2; exit 3;; esac\n"
        f'exec {sys.executable} "$@"\n'
    )
    dying.chmod(0o755)
    write_jobs(workdir, sshd, python=str(dying), name="dying")
    failed = kernel.execute("%job apply dying.ssh2", timeout=120)
    line = one_line_error(failed)
    assert "ssh client for 127.0.0.2 exited" in line or "ssh client for 127.0.0.3 exited" in line, line
    assert "worker boom" in line and "worker boom" in log_named(line, workdir)

    (workdir / "faraway.py").write_text(
        "from monarch._src.job.job import SSHJob\n"
        f"ssh2 = SSHJob(python_exe={sys.executable!r}, ssh_args=('-tt', '-F', {str(sshd.ssh_config)!r}), monarch_port={free_port()})\n"
        "ssh2.add_mesh('hosts', ['127.0.0.2', '203.0.113.5'])\n"  # TEST-NET: never contacted
    )
    failed = kernel.execute("%job apply faraway.ssh2", timeout=60)
    line = one_line_error(failed)
    from monarch_jupyter.jobs.engines.transport import loopback_only as _loopback_only

    if _loopback_only(socket.gethostname()):  # as on the CI machines: say which configure() call to add
        assert 'monarch.config.configure(default_transport="tcp://ADDRESS:0")' in line, line
    else:  # a routable hostname: the unreachable host is named
        assert "203.0.113.5" in line, line

    # nothing of the failed applies is left; the running job and its cache are untouched
    assert sorted(remote_workers(tag)) == workers
    assert len(ssh_clients(tag)) == 2
    assert cache.read_bytes() == before
    status = kernel.ok("%job")
    assert "hosts: 2 hosts, 2 live workers" in status.text, status.text
    kernel.ok("%job kill", timeout=60)
    assert wait_for(lambda: not remote_workers(tag) and not ssh_clients(tag), 10)


def test_missing_tty_is_added(sshd, start_kernel, tag, workdir):
    write_jobs(workdir, sshd, tty=False)
    kernel = start_kernel()
    kernel.ok("%load_ext monarch_jupyter")
    applied = kernel.ok("%job apply jobs.ssh2", timeout=120)
    assert "added -tt to ssh_args" in applied.text, applied.text
    assert len(remote_workers(tag)) == 2
    again = kernel.ok("%job apply jobs.ssh2", timeout=120)
    assert "already running, nothing applied" in again.text, again.text
    kernel.ok("%job kill", timeout=60)
    assert wait_for(lambda: not remote_workers(tag) and not ssh_clients(tag), 10), remote_workers(tag)


def test_ssh_convenience_form_is_saved_and_recreated(sshd, start_kernel, tag, workdir):
    port = free_port()
    sshd.ports_used.add(port)
    kernel = start_kernel()
    kernel.ok("%load_ext monarch_jupyter")
    line = (
        f"%job apply --ssh hosts={','.join(HOSTS)} --python {sys.executable} "
        f"--port {port} --config {sshd.ssh_config}"
    )
    applied = kernel.ok(line, timeout=120)
    assert "applied: context 'default': SSHJob hosts×2 (2 live)" in applied.text, applied.text
    saved = (workdir / ".monarch/default/spec").read_text()
    assert saved.startswith("monarch_jupyter.ssh_jobs.ssh__"), saved
    # another process (as the monarch CLI does) re-creates an equal job from the saved path
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import importlib, pickle, sys\n"
            f"mod, _, attr = {saved!r}.rpartition('.')\n"
            "job = getattr(importlib.import_module(mod), attr)\n"
            "cached = pickle.load(open('.monarch/default/state.pkl', 'rb'))\n"
            "print('CAN_RUN', cached._running._meshes == job._meshes and cached._running._ssh_args == job._ssh_args"
            " and cached._running._port == job._port and cached._running._python_exe == job._python_exe)",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "CAN_RUN True" in check.stdout, check.stdout + check.stderr
    status = kernel.ok("%job")
    assert saved in status.text and "2 live workers" in status.text, status.text
    kernel.ok("%job kill", timeout=60)
    assert wait_for(lambda: not remote_workers(tag) and not ssh_clients(tag), 10)
    # a bare apply in a new kernel re-creates it from the saved spec (this kernel used the port)
    kernel.km.restart_kernel(now=True)
    kernel.kc.wait_for_ready(timeout=60)
    kernel.ok("%load_ext monarch_jupyter", timeout=120)
    again = kernel.ok("%job apply", timeout=120)
    assert "applied: context 'default': SSHJob hosts×2 (2 live)" in again.text, again.text
    kernel.ok("%job kill", timeout=60)
    assert wait_for(lambda: not remote_workers(tag) and not ssh_clients(tag), 10)


def test_reapply_same_port_in_one_kernel(sshd, start_kernel, tag, workdir):
    write_jobs(workdir, sshd)
    kernel = start_kernel()
    kernel.ok("%load_ext monarch_jupyter")
    kernel.ok("%job apply jobs.ssh2", timeout=120)
    kernel.ok("%%remote bash\necho one", timeout=120)
    kernel.ok("%job kill", timeout=60)
    assert wait_for(lambda: not remote_workers(tag) and not ssh_clients(tag), 10)
    # Monarch 0.7 fails ~60 s later on a host:port this process used: say so at once
    again = kernel.execute("%job apply jobs.ssh2", timeout=150)
    line = one_line_error(again)
    assert again.duration < 5 and "restart the kernel" in line and "another port" in line, line
    assert not remote_workers(tag) and not ssh_clients(tag)
    # after a restart the same port works
    kernel.km.restart_kernel(now=True)
    kernel.kc.wait_for_ready(timeout=60)
    kernel.ok("%load_ext monarch_jupyter")
    kernel.ok("%job apply jobs.ssh2", timeout=120)
    run = kernel.ok("%%remote bash\necho two", timeout=120)
    assert run.text.count("two") == 2, run.text
    kernel.ok("%job kill", timeout=60)
    assert wait_for(lambda: not remote_workers(tag) and not ssh_clients(tag), 10)


@pytest.mark.parametrize("when", ["preflight", "workers"])
def test_interrupted_apply_leaves_nothing(sshd, start_kernel, tag, workdir, tmp_path, when):
    """Ctrl-C while the hosts are probed, or while the workers start: nothing is left anywhere."""
    slow = tmp_path / "slow-python"
    only = 'case "$2" in *run_worker_loop_forever*) sleep 30;; esac' if when == "workers" else "sleep 30"
    slow.write_text(f'#!/bin/sh\n{only}\nexec {sys.executable} "$@"\n')
    slow.chmod(0o755)
    write_jobs(workdir, sshd, python=str(slow))
    kernel = start_kernel()
    kernel.ok("%load_ext monarch_jupyter")
    seen = {}

    def interrupt_when_remote_sleeps():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            sleeping = [
                p
                for p in tagged_pids(tag)
                if Path(f"/proc/{p}/cmdline").exists() and b"sleep" in Path(f"/proc/{p}/cmdline").read_bytes()
            ]
            if len(sleeping) >= 2:
                seen["t"] = time.monotonic()
                kernel.interrupt()
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=interrupt_when_remote_sleeps)
    watcher.start()
    result = kernel.execute("%job apply jobs.ssh2", timeout=60)
    watcher.join()
    assert "t" in seen, "the remote side never started"
    assert result.error is not None and result.error["ename"] == "Interrupted", result.text
    assert time.monotonic() - seen["t"] < 5
    assert wait_for(
        lambda: (
            not [p for p in tagged_pids(tag) if b"sleep" in Path(f"/proc/{p}/cmdline").read_bytes()]
            and not ssh_clients(tag)
        ),
        2.5,
    ), tagged_pids(tag)
    assert not (workdir / ".monarch/default/state.pkl").exists()


@pytest.mark.parametrize("stop", ["%remote stop --all", "%job kill"])
def test_a_run_stopped_from_another_kernel_says_by_what(sshd, start_kernel, tag, workdir, tmp_path, stop):
    """On SSH, the stop is recorded on the hosts, whose files this machine's
    kernel does not read (its runs folder is elsewhere here); the hosts send it with each exit."""
    write_jobs(workdir, sshd)
    env = {"MONARCH_JUPYTER_RUNS_DIR": str(tmp_path / "kernel-side")}
    a = start_kernel(env=env)
    a.ok("%load_ext monarch_jupyter")
    a.ok("%job apply jobs.ssh2", timeout=120)
    box: dict[str, object] = {}
    worker = threading.Thread(target=lambda: box.update(r=a.execute("%remote sleep 300.62", timeout=90)))
    worker.start()
    try:
        assert wait_for(lambda: len(_argv_pids(tag, lambda argv: b"300.62" in argv)) == 2, 30)
        b = start_kernel(env=env)
        b.ok("%load_ext monarch_jupyter")
        b.ok(stop, timeout=90)
    finally:
        worker.join(90)
        if stop != "%job kill":
            a.ok("%job kill", timeout=60)
    r = box["r"]
    assert f"was stopped by {stop.split(' --')[0]} (kernel pid" in r.text, r.text
    assert wait_for(lambda: not remote_workers(tag) and not ssh_clients(tag), 10)
