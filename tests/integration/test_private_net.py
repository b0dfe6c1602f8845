"""Monarch 0.7's local workers accept any peer on abstract Unix sockets, which
another user of the machine can connect to; the ``monarch-private`` kernel (its own network
namespace, channels over ipc) keeps them out of reach. A real second user tries both kernels."""

from __future__ import annotations

import os
import shutil
import tempfile
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from jupyter_client.provisioning import KernelProvisionerFactory

from harness import tagged_pids, worker_pids
from monarch_jupyter.system import private_net
from monarch_jupyter.system import procfs as _procfs

OTHER_PYTHON = "/usr/bin/python3"  # the second user cannot run the test's venv (under /root)
CONNECT = (
    "import socket, sys\n"
    "ok = []\n"
    "for name in sys.argv[1:]:\n"
    "    s = socket.socket(socket.AF_UNIX)\n"
    "    try:\n"
    "        s.connect('\\0' + name); ok.append(name)\n"
    "    except OSError:\n"
    "        pass\n"
    "    s.close()\n"
    "print(len(ok))\n"
)


@pytest.fixture
def private_kernel_spec(tmp_path, monkeypatch):
    """The kernel spec installed under a scratch prefix, its provisioner registered (as an
    installed wheel's entry point does)."""
    private_net.install(prefix=str(tmp_path / "prefix"))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "prefix" / "share" / "jupyter"))
    entry = EntryPoint(
        private_net.PROVISIONER,
        "monarch_jupyter.system.private_provisioner:PrivateNetProvisioner",
        "jupyter_client.kernel_provisioners",
    )
    monkeypatch.setitem(KernelProvisionerFactory.instance().provisioners, private_net.PROVISIONER, entry)


def _netns(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def _listening_abstract(tag: str, netns: int) -> set[str]:
    """The abstract Unix socket names the tagged processes (kernel, workers, procs) of network
    namespace ``netns`` listen on."""
    names: set[str] = set()
    for pid in tagged_pids(tag):
        try:
            if _netns(pid) != netns:
                continue
            names |= _abstract(Path(f"/proc/{pid}/net/unix").read_text(), _procfs.socket_inodes(pid))
        except OSError:
            continue  # gone meanwhile
    return names


def _abstract(table: str, inodes: set[int] | None = None) -> set[str]:
    names = set()
    for line in table.splitlines()[1:]:
        parts = line.split()
        listening = len(parts) >= 8 and parts[7].startswith("@") and int(parts[3], 16) & 0x10000
        if listening and (inodes is None or int(parts[6]) in inodes):
            names.add(parts[7][1:])
    return names


def _reachable(second_user, names: set[str]) -> int:
    r = second_user.run(OTHER_PYTHON, "-c", CONNECT, *sorted(names))
    assert r.returncode == 0, r.stderr
    return int(r.stdout.strip())


@pytest.mark.skipif(not os.path.exists(OTHER_PYTHON), reason=f"the second user needs {OTHER_PYTHON}")
def test_another_user_reaches_local_workers_only_outside_the_private_kernel(
    start_kernel, second_user, private_kernel_spec, tag, workdir
):
    # the ordinary kernel: the second user connects to its workers' abstract sockets
    plain = start_kernel(cwd=workdir)
    plain.ok("%load_ext monarch_jupyter")
    plain.ok("%job apply --local hosts=2")
    assert "any user of this machine" in plain.ok("%job").text
    names = _listening_abstract(tag, _netns(os.getpid()))
    assert names and _reachable(second_user, names) == len(names), names
    plain.ok("%job kill")

    private_dir = workdir / "private"
    private_dir.mkdir()
    k = start_kernel(cwd=private_dir, kernel_name=private_net.KERNEL_NAME)
    assert k.km.transport == "ipc"
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=2")
    ran = k.ok("%%remote bash\necho rank $MONARCH_RANK_hosts")
    assert "[hosts=0] rank 0" in ran.text and "[hosts=1] rank 1" in ran.text, ran.text
    assert "reach     this kernel only" in k.ok("%job").text
    workers = worker_pids(tag)
    assert len(workers) == 2
    kernel_pid = k.km.provisioner.process.pid
    assert _netns(kernel_pid) != _netns(os.getpid())
    names = _listening_abstract(tag, _netns(kernel_pid))
    assert names, "the workers listen on no abstract socket: Monarch changed (the test is moot)"
    assert not names & _abstract(Path("/proc/net/unix").read_text()), "visible outside the namespace"
    assert _reachable(second_user, names) == 0
    k.ok("%job kill")


ENTER = (
    "import importlib.util, os, socket, sys\n"
    "spec = importlib.util.spec_from_file_location('private_net', sys.argv[1])\n"
    "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
    "before = os.stat('/proc/self/ns/net').st_ino\n"
    "m.enter()\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
    "print(os.getuid(), m.in_private_net(), os.stat('/proc/self/ns/net').st_ino != before)\n"
)


@pytest.mark.skipif(not os.path.exists(OTHER_PYTHON), reason=f"the second user needs {OTHER_PYTHON}")
def test_a_user_without_root_gets_the_namespace_with_its_own_uid(second_user):
    """As an ordinary user, the namespace comes inside a user namespace that maps the user's uid to
    itself (files made and processes owned are the user's, as outside); the loopback is up."""
    folder = Path(tempfile.mkdtemp(prefix="mj-private-net-", dir="/tmp"))  # theirs to read
    try:
        module = folder / "private_net.py"
        module.write_text(Path(private_net.__file__).read_text())
        os.chmod(folder, 0o755)
        os.chmod(module, 0o644)
        r = second_user.run(OTHER_PYTHON, "-c", ENTER, str(module))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if "user namespaces off" in r.stderr or "Operation not permitted" in r.stderr:
        pytest.skip(f"this machine allows no user namespace: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(second_user.uid), "True", "True"], r.stdout
