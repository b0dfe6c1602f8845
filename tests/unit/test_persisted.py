"""Artefacts written by the code before the re-lay (a1a11db), loaded by today's.

Every file under ``tests/fixtures/persisted/`` was made by ``make.py`` there from commit 6ec2417
(see its README.md): a folder's ``.monarch/`` (pickles signed by the old ``_signing``, saved
specs), the spec paths the old ``%job apply`` parser saved, the old private-network
``kernel.json`` and the server-extension config. Each test fails if the persisted path it names
(the shims at the package top, the signature format, the ``.monarch/`` layout) breaks.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys

import pytest

from monarch_jupyter.jobs import cache
from monarch_jupyter.jobs.contexts import Layout
from monarch_jupyter.jobs.store import JobStore
from persisted import FIXTURES, REPO, install_old_folder


@pytest.fixture
def old_folder(tmp_path, monkeypatch) -> Layout:
    root = tmp_path / "nb"
    root.mkdir()
    return install_old_folder(root, monkeypatch)


def test_the_old_folder_keeps_its_layout(old_folder):
    """``.monarch/job_state.pkl`` → ``local/state.pkl`` as the old ``context use`` wrote it."""
    assert old_folder.current() == "local"
    assert old_folder.names() == ["local", "slurm"]
    assert old_folder.read_spec("local", trusted=True) == "monarch_jupyter.local_jobs.hosts_2"
    assert old_folder.read_spec("slurm") is None


def test_an_old_local_cache_loads_into_todays_process_job(old_folder):
    from monarch.job import ProcessJob

    from monarch_jupyter.jobs.engines import engine_for
    from monarch_jupyter.jobs.engines.local import LocalEngine

    job = JobStore(old_folder).load()  # the active context, through the link
    assert type(job) is ProcessJob and job._meshes == {"hosts": 2}
    assert isinstance(engine_for(job), LocalEngine)


def test_an_old_slurm_cache_loads_into_todays_slurm_job(old_folder):
    """The old pickle names ``monarch_jupyter.slurm.SlurmJob`` by reference: the shim resolves it
    to the class in jobs/engines/slurm_job.py, and the Slurm engine claims it."""
    from monarch_jupyter.jobs.engines import engine_for
    from monarch_jupyter.jobs.engines.slurm import SlurmEngine
    from monarch_jupyter.jobs.engines.slurm_job import SlurmJob

    assert b"monarch_jupyter.slurm\x94" in (FIXTURES / "monarch" / "slurm" / "state.pkl").read_bytes()
    job = JobStore(old_folder).load("slurm")
    assert type(job) is SlurmJob and job._meshes == {"hosts": 1}
    assert SlurmJob.__module__ == "monarch_jupyter.slurm" and SlurmJob.__qualname__ == "SlurmJob"
    assert isinstance(engine_for(job), SlurmEngine)


@pytest.mark.parametrize("context", ["local", "slurm"])
def test_an_old_cache_is_trusted_only_under_the_key_that_signed_it(tmp_path, monkeypatch, context):
    """The old ``.sig`` is checked, not re-made: under another key, or without it, the old pickle
    is refused unread (so the loads above prove the signature format kept)."""
    root = tmp_path / "nb"
    root.mkdir()
    layout = install_old_folder(root, monkeypatch, key="0" * 64)
    with pytest.raises(cache.UntrustedCacheError, match="does not match its signature"):
        JobStore(layout).load(context)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / "config" / "monarch_jupyter" / "cache.key").write_text(
        (FIXTURES / "cache.key").read_text().strip()
    )
    JobStore(layout).load(context)
    (layout.dir / context / "state.pkl.sig").unlink()
    with pytest.raises(cache.UntrustedCacheError, match="no signature"):
        JobStore(layout).load(context)


SPECS = json.loads((FIXTURES / "specs.json").read_text())


@pytest.mark.parametrize("line", [line for line, path in SPECS.items() if ".local_jobs." in path])
def test_an_old_saved_local_spec_still_resolves(line, tmp_path):
    """The saved spec text, as the ``monarch`` CLI re-applies it (an import of
    ``monarch_jupyter.local_jobs.<attr>``) and as ``%job apply`` reads it back."""
    from monarch.job import ProcessJob

    from monarch_jupyter.jobs.specs.base import LocalSpec, import_attr
    from monarch_jupyter.jobs.specs.parse import parse_apply, spec_from_saved

    path = SPECS[line]
    spec = spec_from_saved(path)
    assert isinstance(spec, LocalSpec) and spec == parse_apply(line) and spec.path == path
    job = import_attr(path, tmp_path)
    assert isinstance(job, ProcessJob) and job._meshes == dict(spec.meshes)


@pytest.mark.parametrize("line", [line for line, path in SPECS.items() if ".ssh_jobs." in path])
def test_an_old_saved_ssh_spec_still_resolves(line):
    from monarch_jupyter.jobs.specs.parse import parse_apply, spec_from_saved
    from monarch_jupyter.jobs.specs.ssh import SSHSpec

    path = SPECS[line]
    spec = spec_from_saved(path)
    assert isinstance(spec, SSHSpec) and spec == parse_apply(line) and spec.path == path
    # an SSHJob enables Monarch's transport when built, before any other Monarch call of the
    # process: built in a fresh one, through the path as the CLI imports it
    module, _, attr = path.rpartition(".")
    probe = (
        f"import importlib\njob = getattr(importlib.import_module({module!r}), {attr!r})\n"
        "print(type(job).__name__, job._meshes, job._python_exe)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout == "SSHJob {'hosts': ['h1', 'h2']} /usr/bin/python3\n", out.stderr


def test_the_old_kernel_spec_names_a_runnable_module_and_a_registered_provisioner():
    """kernel.json as the old ``private_net install`` wrote it: ``-m monarch_jupyter.private_net``
    still runs today's ``main``, and its provisioner's name is still the entry point's."""
    spec = json.loads((FIXTURES / "kernel.json").read_text())
    assert spec["argv"][1:] == ["-m", "monarch_jupyter.private_net", "-f", "{connection_file}"]
    shim = importlib.import_module(spec["argv"][2])
    from monarch_jupyter.system import private_net

    assert shim.main is private_net.main and shim.__file__.endswith("monarch_jupyter/private_net.py")
    assert private_net.kernel_spec()["argv"][1:] == spec["argv"][1:]
    name = spec["metadata"]["kernel_provisioner"]["provisioner_name"]
    # the checkout's entry point (the venv's metadata may be an older install's); no tomllib on 3.10
    section = (
        (REPO / "pyproject.toml")
        .read_text()
        .split('[project.entry-points."jupyter_client.kernel_provisioners"]\n', 1)[1]
    )
    target = re.search(rf'^{re.escape(name)} = "([^"]+)"$', section.split("\n[", 1)[0], re.M)[1]
    module, _, attr = target.partition(":")
    from jupyter_client.provisioning import KernelProvisionerBase

    assert issubclass(getattr(importlib.import_module(module), attr), KernelProvisionerBase)


def test_the_old_server_extension_config_loads_todays_extension():
    """The jupyter_server_config.d json on users' disks names ``monarch_jupyter._server``."""
    old = json.loads((FIXTURES / "jupyter_server_config.json").read_text())
    shipped = json.loads(
        (REPO / "jupyter-config" / "jupyter_server_config.d" / "monarch_jupyter.json").read_text()
    )
    assert old == shipped
    (name,) = old["ServerApp"]["jpserver_extensions"]
    module = importlib.import_module(name)
    assert module._jupyter_server_extension_points() == [{"module": name}]
    assert callable(module._load_jupyter_server_extension)
