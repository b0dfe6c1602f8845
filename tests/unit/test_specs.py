import pytest

from monarch_jupyter.errors import SpecError
from monarch_jupyter.jobs.specs.base import LocalSpec, ModuleSpec, VariableSpec, import_attr, local_attr
from monarch_jupyter.jobs.specs.local import MAX_LOCAL_WORKERS_VAR, parse_local_attr, parse_meshes
from monarch_jupyter.jobs.specs.parse import parse_apply, spec_from_saved


def test_bare_apply_means_saved_spec():
    assert parse_apply("") is None
    assert parse_apply("   ") is None


@pytest.mark.parametrize(
    "line, meshes",
    [
        ("--local hosts=2", (("hosts", 2),)),
        ("--local=hosts=2", (("hosts", 2),)),
        ("--local trainers=4,loaders=1", (("trainers", 4), ("loaders", 1))),
        ("--local trainers=4, loaders=1", (("trainers", 4), ("loaders", 1))),
    ],
)
def test_local_specs(line, meshes):
    spec = parse_apply(line)
    assert spec == LocalSpec(meshes)


def test_module_and_variable_specs():
    assert parse_apply("myjobs.job") == ModuleSpec("myjobs.job")
    assert parse_apply("pkg.sub.job") == ModuleSpec("pkg.sub.job")
    assert parse_apply("my_job") == VariableSpec("my_job")


@pytest.mark.parametrize(
    "line, fragment",
    [
        ("--local", "at least one"),
        ("--local hosts", "MESH=N"),
        ("--local hosts=0", "1..256"),
        ("--local hosts=x", "1..256"),
        ("--local hosts=\uff12", "host count for 'hosts' must be 1..256, got '\uff12'"),  # a full-width 2
        ("--ssh hosts=a --port \uff12\uff12", "--port wants 1..65535"),
        ("--local 2=2", "invalid mesh name"),
        ("--local a__b=2", "invalid mesh name"),
        ("--local hosts=1,hosts=2", "twice"),
        ("--bogus", "unknown option"),
        ("a.b extra", "unexpected words"),
        ("1abc", "not a spec"),
        ("'unclosed", "cannot parse"),
    ],
)
def test_bad_specs_say_what_to_do(line, fragment):
    with pytest.raises(SpecError) as info:
        parse_apply(line)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_local_attr_round_trip():
    meshes = {"trainers": 2, "data_loaders": 1}
    attr = local_attr(meshes)
    assert attr == "trainers_2__data_loaders_1"
    assert parse_local_attr(attr) == meshes
    for bad in ("hosts", "hosts_x", "_2", "hosts_0", "__hosts_2"):
        with pytest.raises(AttributeError):
            parse_local_attr(bad)


def test_local_spec_path_is_importable_spec():
    spec = parse_meshes("hosts=3")
    assert spec.path == "monarch_jupyter.local_jobs.hosts_3"
    assert spec_from_saved(spec.path) == spec
    assert spec_from_saved("mod.job") == ModuleSpec("mod.job")
    with pytest.raises(SpecError):
        spec_from_saved("not a path")


def test_local_jobs_module_builds_process_jobs():
    from monarch.job import ProcessJob

    import monarch_jupyter.local_jobs as local_jobs

    job = local_jobs.trainers_2__loaders_1
    assert isinstance(job, ProcessJob)
    assert job._meshes == {"trainers": 2, "loaders": 1}
    with pytest.raises(AttributeError):
        local_jobs.nonsense  # noqa: B018 - the module __getattr__ is what raises


def test_import_attr_imports_from_the_folder_and_picks_up_edits(tmp_path):
    import sys

    module = tmp_path / "spec_mod_for_test.py"
    module.write_text("job = 1\n")
    try:
        assert import_attr("spec_mod_for_test.job", tmp_path) == 1
        assert sys.path[0] == str(tmp_path)
        module.write_text("job = 2  # edited\n")
        assert import_attr("spec_mod_for_test.job", tmp_path) == 2
    finally:
        sys.modules.pop("spec_mod_for_test", None)


@pytest.mark.parametrize(
    "source, path, fragment",
    [
        (None, "absent_mod_xyz.job", "no module named 'absent_mod_xyz'"),
        ("import absent_dep_xyz\n", "spec_bad_dep.job", "No module named 'absent_dep_xyz'"),
        ("raise ValueError('bad config')\n", "spec_raises.job", "ValueError: bad config"),
        ("x = 1\n", "spec_no_attr.job", "has no attribute 'job'"),
    ],
)
def test_import_attr_failures_are_one_line(tmp_path, source, path, fragment):
    import sys

    name = path.split(".")[0]
    if source is not None:
        (tmp_path / f"{name}.py").write_text(source)
    try:
        with pytest.raises(SpecError) as info:
            import_attr(path, tmp_path)
    finally:
        sys.modules.pop(name, None)
    assert fragment in str(info.value) and "\n" not in str(info.value)


# ── the stray word and the total bound ──────────────────────────
def test_stray_word_after_a_mesh_is_named():
    with pytest.raises(SpecError) as info:
        parse_apply("--local hosts=2 extra")
    assert "unexpected word 'extra' after hosts=2" in str(info.value)
    assert "got '2 extra'" not in str(info.value)
    # a space after the comma is still fine
    assert parse_apply("--local hosts=2, aux=1").meshes == (("hosts", 2), ("aux", 1))


def test_local_total_is_bounded_and_the_bound_can_be_raised(monkeypatch):
    many = ",".join(f"m{i}=1" for i in range(65))
    monkeypatch.delenv(MAX_LOCAL_WORKERS_VAR, raising=False)
    with pytest.raises(SpecError) as info:
        parse_apply(f"--local {many}")
    message = str(info.value)
    assert "65 worker processes in all, more than the bound of 64" in message
    assert f"%env {MAX_LOCAL_WORKERS_VAR}=65" in message and "\n" not in message
    assert parse_apply("--local a=32,b=32").meshes == (("a", 32), ("b", 32))
    with pytest.raises(SpecError, match="bound of 64"):  # the saved spec (or the CLI's) too
        spec_from_saved("monarch_jupyter.local_jobs.a_40__b_40")
    with pytest.raises(AttributeError):
        parse_local_attr("a_40__b_40")
    monkeypatch.setenv(MAX_LOCAL_WORKERS_VAR, "80")
    assert len(parse_apply(f"--local {many}").meshes) == 65
    assert parse_local_attr("a_40__b_40") == {"a": 40, "b": 40}


# ── one mesh-name rule for --local and --ssh ──────────────────────────────
@pytest.mark.parametrize("name", ["hosts", "my_hosts", "data_loaders_2", "x", "box_x1"])
def test_local_and_ssh_accept_the_same_mesh_names(name):
    from monarch_jupyter.jobs.specs.ssh import SSHSpec

    local = parse_apply(f"--local {name}=2")
    assert local.meshes == ((name, 2),) and spec_from_saved(local.path) == local
    ssh = parse_apply(f"--ssh {name}=h1,h2")
    assert isinstance(ssh, SSHSpec) and ssh.meshes == ((name, ("h1", "h2")),)
    assert spec_from_saved(ssh.path) == ssh and ssh.path.rpartition(".")[2].isidentifier()


@pytest.mark.parametrize("name", ["2x", "a__b", "_a", "a_", "a-b"])
def test_local_and_ssh_refuse_the_same_mesh_names(name):
    for line in (f"--local {name}=2", f"--ssh {name}=h1"):
        with pytest.raises(SpecError, match="invalid mesh name"):
            parse_apply(line)


def test_ssh_paths_saved_before_still_read_the_same():
    """A path written by the old encoder (mesh names letters and digits, raw) decodes as before."""
    old = "monarch_jupyter.ssh_jobs.ssh__py_python3__port_22222__m_box_127x2e0x2e0x2e2_127x2e0x2e0x2e3"
    spec = spec_from_saved(old)
    assert spec.meshes == (("box", ("127.0.0.2", "127.0.0.3")),) and spec.path == old
