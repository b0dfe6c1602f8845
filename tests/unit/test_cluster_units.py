"""Fast unit tests of the cluster glue: spec naming, mesh sizing per engine, ssh error hints."""

from __future__ import annotations

import pytest

from monarch_jupyter.errors import SpecError
from monarch_jupyter.jobs.engines.ssh_checks import ssh_hint as _ssh_hint
from monarch_jupyter.jobs.specs.parse import parse_apply, spec_from_saved
from monarch_jupyter.jobs.specs.ssh import SSHSpec, from_attr
from monarch_jupyter.runtime import introspect as _introspect


class _Shaped:
    def __init__(self, meshes):
        self._meshes = meshes


def test_mesh_sizes_per_engine_shape():
    assert _introspect.mesh_sizes(_Shaped({"hosts": 2}), None) == {"hosts": 2}  # ProcessJob / SlurmJob
    assert _introspect.mesh_sizes(_Shaped({"hosts": ["a", "b", "c"]}), None) == {"hosts": 3}  # SSHJob
    # KubernetesJob keeps a config dict per mesh (monarch._src.job.kubernetes._MeshConfig)
    k8s = {"trainers": {"service_name": "t", "label_selector": "x", "num_replicas": 4, "pod_rank_label": "r"}}
    assert _introspect.mesh_sizes(_Shaped(k8s), None) == {"trainers": 4}
    assert _introspect.mesh_sizes(_Shaped({"odd": object()}), None) == {"odd": None}


@pytest.mark.parametrize(
    "line",
    [
        "--ssh hosts=node1,node2",
        "--ssh hosts=10.0.0.1,my-host_x.example.org --python '/opt/v env/bin/python3' --port 2345",
        "--ssh=a=h1 --ssh b=h2,h3 --config /home/u/.ssh/config",
    ],
)
def test_ssh_spec_round_trips_through_its_saved_path(line):
    spec = parse_apply(line)
    assert isinstance(spec, SSHSpec)
    assert spec_from_saved(spec.path) == spec
    module, _, attr = spec.path.rpartition(".")
    assert module == "monarch_jupyter.ssh_jobs" and attr.isidentifier()
    assert from_attr(attr).describe() == spec.describe()


@pytest.mark.parametrize(
    "line, message",
    [
        ("--ssh", "needs a value"),
        ("--ssh hosts", "MESH=HOST"),
        ("--ssh 1bad=h", "invalid mesh name"),
        ("--ssh hosts=a --port 0", "--port"),
        ("--ssh hosts=a --bogus 1", "unexpected"),
    ],
)
def test_ssh_spec_errors_are_one_line(line, message):
    with pytest.raises(SpecError, match=message):
        parse_apply(line)


def test_ssh_hints():
    assert "host key" in _ssh_hint("Host key verification failed.\r\n")
    assert "refused" in _ssh_hint("root@h: Permission denied (publickey).")
    assert "unreachable" in _ssh_hint("ssh: connect to host 1.2.3.4 port 22: Connection refused")


# ── engines: one per kind of job, each saying whether its worker PIDs are local ──
class _Pid:
    def __init__(self, pid):
        self.pid = pid


class _Job:
    """Duck-types a running JobTrait whose ``_host_to_pid`` names a dead local PID."""

    def __init__(self, meshes, table):
        self._meshes, self._host_to_pid = meshes, table
        self._running = self

    def _is_running(self):
        return True


def _dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_engine_for_picks_by_class_and_each_says_whether_workers_are_local():
    from monarch_jupyter.jobs.engines import engine_for
    from monarch_jupyter.jobs.engines.base import OtherEngine
    from monarch_jupyter.jobs.engines.local import LocalEngine
    from monarch_jupyter.jobs.engines.slurm import SlurmEngine
    from monarch_jupyter.jobs.engines.ssh import SSHEngine

    class ProcessJob(_Job):
        pass

    ProcessJob.__module__ = "monarch._src.job.process"

    class SSHJob(_Job):
        pass

    class SlurmJob(_Job):
        pass

    SlurmJob.__module__ = "monarch_jupyter.slurm"
    cases = [(ProcessJob, LocalEngine, True), (SSHJob, SSHEngine, False), (SlurmJob, SlurmEngine, False)]
    cases.append((_Job, OtherEngine, False))
    for cls, engine_class, local in cases:
        engine = engine_for(cls({}, {}))
        assert type(engine) is engine_class and engine.workers_are_local is local


def test_a_dead_local_pid_fails_a_local_job_but_not_one_of_another_engine():
    """Only an engine whose workers are local (or whose local processes hold the job up)
    judges the PIDs from this machine's /proc."""
    from monarch_jupyter.jobs.engines.base import OtherEngine
    from monarch_jupyter.jobs.engines.local import LocalEngine

    job = _Job({"hosts": 1}, {"hosts_0": _Pid(_dead_pid())})
    assert not LocalEngine().is_alive(job)
    assert LocalEngine().live_workers(job, {"hosts": 1}) == {"hosts": 0}
    assert OtherEngine().is_alive(job)
    assert OtherEngine().live_workers(job, {"hosts": 1}) == {"hosts": None}


def test_an_engine_must_say_whether_its_workers_are_local():
    from monarch_jupyter.jobs.engines.base import Engine

    with pytest.raises(TypeError, match="workers_are_local"):

        class Forgetful(Engine):
            def claims(self, job):
                return False


def test_ssh_engine_owns_the_addresses_it_dialled():
    from monarch_jupyter.jobs.engines.ssh import SSHEngine
    from monarch_jupyter.jobs.engines.ssh_checks import ApplyFailed

    job = _Job({"hosts": ["h1", "h2"]}, {})
    job._port = 2345
    first, second = SSHEngine(), SSHEngine()
    first.check_addresses(job)
    first.remember_addresses(job)
    with pytest.raises(ApplyFailed, match="h1:2345 already served an earlier job"):
        first.check_addresses(job)
    second.check_addresses(job)  # another owner (a fresh process's) has dialled nothing
    assert first.live_workers(job, {"hosts": 2}) == {"hosts": None}  # no ssh clients known
