"""Monarch's job services from a notebook: telemetry and admin kept by the spec, loopback only,
and a telemetry sidecar that outlives a kernel restart. Real kernels, real workers."""

from __future__ import annotations

import re

import pytest

from harness import job_kernel, tagged_pids
from monarch_jupyter import _procfs

pytestmark = pytest.mark.kernel

LOOPBACK = ("127.0.0.1", "::1")


@pytest.fixture(scope="module")
def tkernel(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("services") / "nb", "hosts=2 --telemetry") as kernel:
        yield kernel


def urls(kernel) -> dict[str, str]:
    text = kernel.ok("%job").text
    return dict(re.findall(r"^\s+(telemetry|admin|dashboard)\s+(\S+)$", text, re.M))


def test_spec_keeps_the_services(tkernel):
    assert (
        tkernel.cwd / ".monarch/default/spec"
    ).read_text() == "monarch_jupyter.local_jobs.hosts_2__telemetry"
    status = tkernel.ok("%job").text
    assert re.search(r"^\s+services\s+telemetry, admin$", status, re.M), status
    found = urls(tkernel)
    assert found["telemetry"].startswith("http://127.0.0.1:"), status
    assert found["admin"].startswith("http://localhost:"), status
    # the CLI's import path builds the same job
    built = tkernel.ok(
        "from monarch_jupyter import local_jobs, services\n"
        "print('SERVICES', services.configured(local_jobs.hosts_2__telemetry))"
    ).text
    assert "SERVICES ('telemetry', 'admin')" in built


def test_a_configured_variable_job_is_saved_with_its_services(tkernel):
    tkernel.ok("from monarch.job import ProcessJob\nvjob = ProcessJob({'hosts': 2}).enable_telemetry()")
    applied = tkernel.ok("%job apply vjob")
    assert "lives only in this kernel" not in applied.text, applied.text
    assert (
        tkernel.cwd / ".monarch/default/spec"
    ).read_text() == "monarch_jupyter.local_jobs.hosts_2__telemetry"
    unsaid = tkernel.ok(
        "from monarch_jupyter.resolve import saved_path_for\n"
        "print('SAVED', saved_path_for(ProcessJob({'hosts': 2}).enable_telemetry(retention_secs=5)))"
    ).text
    assert "SAVED None" in unsaid  # a config a spec cannot say: the job stays kernel-only
    assert "changed" not in tkernel.ok("%job apply").text  # the bare apply: the same job, reused


def test_a_second_admin_job_in_one_kernel_says_why_not(tkernel):
    before = urls(tkernel)
    refused = tkernel.execute("%job apply --local hosts=1 --telemetry")
    text = refused.text.strip()
    assert len(text.splitlines()) == 1 and "Traceback" not in text, text
    assert "starts one per process: %job kill, restart the kernel" in text
    assert urls(tkernel) == before  # the running job is untouched


def test_no_service_listens_beyond_loopback(tkernel):
    pids = tagged_pids(tkernel.tag)
    listening = {pid: _procfs.listening_tcp(pid) for pid in pids}
    everything = [(pid, addr, port) for pid, socks in listening.items() for addr, port in socks]
    assert [s for s in everything if s[1] not in LOOPBACK] == [], everything
    ports = {port for _, _, port in everything}
    found = urls(tkernel)
    for key in ("telemetry", "admin"):
        assert int(found[key].rsplit(":", 1)[1]) in ports, (key, found, everything)


def test_sidecar_in_its_own_session(tkernel):
    sidecars = [p for p in tagged_pids(tkernel.tag) if "_sidecar_main" in " ".join(_procfs.cmdline(p) or [])]
    assert len(sidecars) == 1
    kernel_pid = tkernel.km.provisioner.pid
    assert _procfs.pgid(sidecars[0]) != _procfs.pgid(kernel_pid)
