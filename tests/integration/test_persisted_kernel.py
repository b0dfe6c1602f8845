"""Old artefacts (``tests/fixtures/persisted/``, written by the code before the re-lay) in real
kernels: the old private-network kernel.json starts today's kernel, and a kernel in a folder
whose ``.monarch/`` the old code wrote reads the old signed cache and its saved spec."""

from __future__ import annotations

import json
import os
import sys
from importlib.metadata import EntryPoint

import pytest
from jupyter_client.provisioning import KernelProvisionerFactory

from monarch_jupyter.system import private_net
from persisted import FIXTURES, install_old_folder


@pytest.fixture
def old_private_kernel_spec(tmp_path, monkeypatch) -> str:
    """The old kernel.json installed as ``jupyter kernelspec install`` left it (its ``{python}``
    this venv's), and the provisioner it names registered as an installed wheel's entry point."""
    spec = json.loads((FIXTURES / "kernel.json").read_text())
    spec["argv"][0] = sys.executable
    folder = tmp_path / "share" / "jupyter" / "kernels" / "monarch-private-old"
    folder.mkdir(parents=True)
    (folder / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share" / "jupyter"))
    name = spec["metadata"]["kernel_provisioner"]["provisioner_name"]
    entry = EntryPoint(
        name,
        "monarch_jupyter.system.private_provisioner:PrivateNetProvisioner",
        "jupyter_client.kernel_provisioners",
    )
    monkeypatch.setitem(KernelProvisionerFactory.instance().provisioners, name, entry)
    return folder.name


def test_the_old_private_kernel_spec_starts_a_kernel_in_its_own_network(
    start_kernel, old_private_kernel_spec, workdir
):
    k = start_kernel(cwd=workdir, kernel_name=old_private_kernel_spec)
    assert k.km.transport == "ipc"
    out = k.ok(
        "import os, sys\n"
        f"print(sys.argv[0].endswith('monarch_jupyter/private_net.py'), os.environ.get({private_net.ENV!r}) == "
        "str(os.stat('/proc/self/ns/net').st_ino))"
    ).text
    assert out.strip() == "True True", out
    assert (
        os.stat(f"/proc/{k.km.provisioner.process.pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
    )
    k.ok("%load_ext monarch_jupyter")


def test_a_kernel_reads_the_old_signed_cache_and_its_saved_spec(start_kernel, workdir, monkeypatch):
    install_old_folder(workdir, monkeypatch)
    k = start_kernel(cwd=workdir, env={"XDG_CONFIG_HOME": os.environ["XDG_CONFIG_HOME"]})
    k.ok("%load_ext monarch_jupyter")
    text = k.ok("%job").text
    # unpickled (signature checked under the old key), never applied: no workers to find
    assert "was not loaded" not in text and "not written by your kernels" not in text, text
    assert "context 'local'" in text and "state     not running" in text, text
    assert "class     ProcessJob" in text and "spec      monarch_jupyter.local_jobs.hosts_2" in text, text
    assert "mesh      hosts: 2 hosts" in text, text
