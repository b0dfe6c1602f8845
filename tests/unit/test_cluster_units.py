"""Fast unit tests of the cluster glue: spec naming, mesh sizing per engine, ssh error hints."""

from __future__ import annotations

import pytest

from monarch_jupyter import _introspect
from monarch_jupyter.errors import SpecError
from monarch_jupyter.specs import parse_apply, spec_from_saved
from monarch_jupyter.ssh import _ssh_hint
from monarch_jupyter.ssh_specs import SSHSpec, from_attr


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
