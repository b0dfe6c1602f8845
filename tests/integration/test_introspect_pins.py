"""Pins of the Monarch internals monarch_jupyter relies on, against the installed torchmonarch.

Each failure names the field and the function of ours that reads it, so an
upgrade that renames one says what to change. ``_introspect`` is the only reader
of private fields; ``slurm.SlurmJob`` overrides SlurmJob's private methods; ``_quiet``
names Monarch's private loggers and messages.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from importlib.metadata import version

import pytest

from harness import TAG_VAR
from monarch_jupyter.jobs import local_records
from monarch_jupyter.runtime import chatter as _quiet
from monarch_jupyter.runtime import introspect as _introspect
from monarch_jupyter.system import procfs as _procfs

MONARCH = f"torchmonarch {version('torchmonarch')}"


def pin(obj, field, reader):
    where = obj if isinstance(obj, type) else type(obj)
    assert hasattr(obj, field), (
        f"{MONARCH}: {where.__module__}.{where.__qualname__} has no '{field}' any more; update {reader}"
    )


def test_process_job_fields():
    from monarch.job import JobTrait, ProcessJob

    job = ProcessJob({"trainers": 2, "loaders": 1}, env={"A": "1"})
    pin(job, "_meshes", "_introspect.declared_meshes")
    pin(job, "_env", "_introspect.worker_env")
    pin(job, "_host_to_pid", "_introspect.worker_pids")
    pin(type(job), "_watch_process", "_introspect.watch_worker_spawns")
    assert "self._watch_process(" in inspect.getsource(type(job)._create), (
        f"{MONARCH}: ProcessJob._create no longer calls _watch_process after each Popen; "
        "update _introspect.watch_worker_spawns"
    )
    pin(JobTrait, "_running", "_introspect.running_job")
    pin(JobTrait, "_is_running", "_introspect.is_running")
    assert isinstance(inspect.getattr_static(JobTrait, "_running"), property), (
        f"{MONARCH}: JobTrait._running is no longer a property; update _introspect.running_job"
    )
    assert _introspect.declared_meshes(job) == {"trainers": 2, "loaders": 1}, (
        "ProcessJob._meshes changed shape"
    )
    assert _introspect.worker_env(job) == {"A": "1"}, "ProcessJob._env changed shape"
    assert _introspect.running_job(job) is None and not _introspect.is_running(job)
    assert isinstance(job._host_to_pid, dict), "ProcessJob._host_to_pid is no longer a dict"


def test_process_state_has_pid():
    from monarch._src.job.job import ProcessState

    assert "pid" in ProcessState._fields, (
        f"{MONARCH}: ProcessState (values of ProcessJob._host_to_pid) has no 'pid'; update _introspect.worker_pids"
    )


def test_job_state_fields():
    from monarch._src.job.job import JobState

    state = JobState({"hosts": "mesh"}, telemetry_url="t", dashboard_url="d", admin_url="a")
    pin(state, "_hosts", "_introspect.host_meshes")
    assert _introspect.host_meshes(state) == {"hosts": "mesh"}, "JobState._hosts changed shape"
    for key in ("telemetry", "dashboard", "admin"):
        pin(state, f"{key}_url", "_introspect.urls")
    assert _introspect.urls(None, state) == {"telemetry": "t", "dashboard": "d", "admin": "a"}


@pytest.mark.kernel  # real Monarch workers, in this process
def test_a_real_process_job_through_introspect(tag, monkeypatch):
    from monarch.job import ProcessJob

    monkeypatch.setenv(TAG_VAR, tag)  # the workers carry the test's tag: reaped even if this fails
    _quiet.start_client_context()
    job = ProcessJob({"hosts": 2})
    try:
        state = job.state(cached_path=None)
        pids = _introspect.worker_pids(job)
        assert sorted(pids) == ["hosts_0", "hosts_1"], (
            f"{MONARCH}: ProcessJob._host_to_pid keys changed: {pids}"
        )
        assert all(_procfs.alive(pid) for pid in pids.values())
        assert _introspect.running_job(job) is job and _introspect.is_running(job)
        assert list(_introspect.host_meshes(state)) == ["hosts"]
        pin(job, "_state", "_introspect.bare_host_meshes")
        bare = _introspect.bare_host_meshes(job)  # what rank_shell attaches with
        assert list(bare) == ["hosts"] and dict(bare["hosts"].sizes) == {"hosts": 2}, (
            f"{MONARCH}: JobTrait._running._state()._hosts changed; update _introspect.bare_host_meshes"
        )
        assert _introspect.mesh_sizes(job, _introspect.host_meshes(state)) == {"hosts": 2}
        assert _introspect.mesh_sizes(object(), _introspect.host_meshes(state)) == {"hosts": 2}, (
            f"{MONARCH}: HostMesh.extent.nelements no longer sizes a mesh; update _introspect._host_count"
        )
    finally:
        job.kill()
    assert not _introspect.is_running(job)


@pytest.mark.parametrize("name", [*sorted(_quiet._CHATTY_LOGGERS), "monarch._src.actor.telemetry"])
def test_private_loggers_exist(name):
    module = importlib.import_module(name)
    logger = getattr(module, "logger", None)
    found = name in logging.Logger.manager.loggerDict
    # a module may make its logger on first use (telemetry does, in a function)
    lazy = "logging.getLogger(__name__)" in inspect.getsource(module)
    assert found or lazy or (logger is not None and logger.name == name), (
        f"{MONARCH}: no logger named {name!r} any more; update _quiet's filters"
    )


def test_get_in_loop_message_and_logger():
    from monarch._src.actor import future, telemetry

    source = inspect.getsource(future)
    assert _quiet._GET_IN_LOOP in source, (
        f"{MONARCH}: the Future.get() in-loop log text changed; update _quiet"
    )
    assert future._GET_ON_LOOP_WARNING.startswith(
        "Future.get() was called from within an active event loop"
    ), f"{MONARCH}: the Future.get() in-loop warning changed; update _quiet.install's warnings filter"
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    target = logging.getLogger("monarch._src.actor.telemetry")
    handler = Keep()
    target.addHandler(handler)
    _quiet.install()
    try:
        telemetry.log_with_tracing(logging.WARNING, "pin probe")
        telemetry.log_with_tracing(logging.WARNING, _quiet._GET_IN_LOOP)
    finally:
        target.removeHandler(handler)
    assert any(m.endswith("pin probe") for m in seen), (
        f"{MONARCH}: log_with_tracing no longer logs through 'monarch._src.actor.telemetry'; update _quiet"
    )
    assert not any(_quiet._GET_IN_LOOP in m for m in seen), f"{MONARCH}: _quiet no longer drops {seen}"


def test_fault_hook_is_read_from_monarch_actor_at_call_time():
    import monarch.actor
    from monarch._src.actor import actor_mesh

    pin(monarch.actor, "unhandled_fault_hook", "_faults.install")
    assert "from monarch.actor import unhandled_fault_hook" in inspect.getsource(actor_mesh), (
        f"{MONARCH}: Monarch no longer reads monarch.actor.unhandled_fault_hook when a mesh fails; update _faults"
    )


_SSH_PROBE = """
import json
from monarch_jupyter.runtime import introspect as _introspect
job = _introspect.ssh_job_class()(python_exe="/py", ssh_args=("-F", "cfg"), monarch_port=2345)
job.add_mesh("hosts", ["h1", "h2"])
missing = [f for f in ("_ssh_args", "_python_exe", "_port", "_transport", "_meshes", "_host_to_pid")
           if not hasattr(job, f)]
before = _introspect.ssh_args(job)
_introspect.set_ssh_args(job, ("-tt", *before))
print(json.dumps({"missing": missing, "args": before, "after": _introspect.ssh_args(job),
                  "python": _introspect.python_exe(job), "port": _introspect.worker_port(job),
                  "transport": _introspect.transport(job), "meshes": _introspect.declared_meshes(job)}))
"""


def test_ssh_job_fields():
    """SSHJob's constructor arguments, read by engines/ssh.py through _introspect (in a fresh
    process: SSHJob() enables its transport, which this one may have done already)."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _SSH_PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert facts["missing"] == [], f"{MONARCH}: SSHJob has no {facts['missing']} any more; update _introspect"
    assert facts["args"] == ["-F", "cfg"] and facts["after"] == ["-tt", "-F", "cfg"]
    assert (facts["python"], facts["port"], facts["transport"]) == ("/py", 2345, "tcp")
    assert facts["meshes"] == {"hosts": ["h1", "h2"]}, "SSHJob._meshes changed shape"
    source = inspect.getsource(_introspect.ssh_job_class())
    assert "spec._ssh_args" in source, (
        f"{MONARCH}: SSHJob.can_run no longer compares _ssh_args; engines.ssh.add_tty must run before it"
    )
    assert '["ssh", *self._ssh_args, host, "-n", command]' in source, (
        f"{MONARCH}: SSHJob no longer starts 'ssh ARGS HOST -n COMMAND'; update engines/ssh_checks.preflight"
    )


def test_private_classes_and_functions_we_use():
    from monarch._src.actor import actor_mesh

    assert _introspect.ssh_job_class().__name__ == "SSHJob"
    assert _introspect.batch_job_class().__name__ == "BatchJob"
    pin(actor_mesh, "enable_transport", "_introspect.enable_transport")


def test_slurm_job_members_we_override_or_read():
    """monarch_jupyter.slurm.SlurmJob overrides three private methods and reads a few fields."""
    from monarch._src.job import slurm as monarch_slurm
    from monarch.job import SlurmJob

    from monarch_jupyter.jobs.engines import slurm_job as ours

    assert SlurmJob is monarch_slurm.SlurmJob, f"{MONARCH}: monarch.job.SlurmJob is another class now"
    for name in ("_create", "_get_job_info_json", "_wait_for_job_start"):
        pin(SlurmJob, name, f"monarch_jupyter.slurm.SlurmJob.{name}")
        theirs = list(inspect.signature(getattr(SlurmJob, name)).parameters)
        mine = list(inspect.signature(getattr(ours.SlurmJob, name)).parameters)
        assert mine == theirs, f"{MONARCH}: SlurmJob.{name}{theirs} differs from our override {mine}"
    for name in ("_kill", "__setstate__"):
        pin(SlurmJob, name, "monarch_jupyter.slurm.SlurmJob")
    wait = inspect.getsource(SlurmJob._wait_for_job_start)
    assert "self._get_job_info_json(" in wait, (
        f"{MONARCH}: SlurmJob no longer polls through _get_job_info_json; update monarch_jupyter.slurm"
    )
    assert "self._wait_for_job_start(" in inspect.getsource(SlurmJob), (
        f"{MONARCH}: SlurmJob no longer waits through _wait_for_job_start; update monarch_jupyter.slurm"
    )
    job = ours.SlurmJob({"hosts": 1}, python_exe="/py", exclusive=False)
    # read by our SlurmJob (cancel) and by batch._SUBMIT, a script run without _introspect
    for name in ("_slurm_job_id", "_python_exe", "_log_dir"):
        pin(job, name, "monarch_jupyter.slurm.SlurmJob / batch._SUBMIT")
    assert "monarch._src.job.slurm" in logging.Logger.manager.loggerDict, (
        f"{MONARCH}: no logger 'monarch._src.job.slurm'; update monarch_jupyter.slurm's filter"
    )


def test_no_other_module_reads_monarch_private_fields():
    """Only _introspect reads Monarch's private attributes (the ones pinned above), and only
    it imports ``monarch._src``; slurm.py overrides SlurmJob's own and is pinned above."""
    import re
    from pathlib import Path

    import monarch_jupyter

    private = (
        r"(_hosts|_meshes|_env|_host_to_pid|_running|_is_running|_watch_process"
        r"|_ssh_args|_python_exe|_port|_transport)"
    )
    access = re.compile(rf"\.{private}\b|[\"']{private}[\"']|(from|import) monarch\._src")
    # batch._SUBMIT is a script that runs where only the spec is imported (pinned above)
    # actors/worker.py runs on the procs as source (test_actor_collection_members pins what it uses)
    allowed = {
        ("batch.py", 'python = getattr(job, "_python_exe", sys.executable)'),
        ("worker.py", "from monarch._src.actor import actor_mesh"),
        # test_debugger_members pins these two
        ("worker.py", "from monarch._src.actor.debugger.debug_controller import debug_controller"),
        ("worker.py", "from monarch._src.actor.debugger.pdb_wrapper import PdbWrapper"),
    }
    package = Path(monarch_jupyter.__file__).parent
    offenders = [
        f"{path.relative_to(package)}:{number}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        if path.name != "introspect.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if access.search(line.split("#")[0]) and (path.name, line.strip()) not in allowed
    ]
    assert offenders == [], f"read Monarch's private fields outside _introspect: {offenders}"


def test_port_reader_reads_the_rust_receiver():
    """``PortReader`` awaits ``PortReceiver._receiver.recv_task()`` and decodes with
    ``PortReceiver._process``: both there, and it gives what ``recv()`` gives."""
    import asyncio

    from monarch.actor import Channel

    async def check() -> None:
        port, receiver = Channel.open()
        reader = _introspect.PortReader(receiver)
        assert reader._fast is not None, (
            f"{MONARCH}: PortReceiver._receiver.recv_task or PortReceiver._process is gone; "
            "update _introspect.PortReader (it fell back to recv())"
        )
        for value in (("exit", 1, [("out", "hi\n", 1)]), None, 3):
            port.send(value)
            assert reader.value(await reader.next()) == value

    asyncio.run(check())


def test_actor_collection_members():
    """actors/: the kernel's port and per-proc setup (through _introspect), and what actors/worker.py
    (the proc-side reader, shipped as source) overrides and calls on each proc."""
    from monarch._src.actor import actor_mesh
    from monarch._src.actor.proc_mesh import SetupActor

    assert callable(getattr(SetupActor, "register_startup_function", None)), (
        f"{MONARCH}: SetupActor.register_startup_function is gone; update _introspect.register_proc_startup"
    )
    params = list(inspect.signature(actor_mesh._Actor._report_exception).parameters)
    assert params == ["self", "e", "ctx", "method_name", "response_port"], (
        f"{MONARCH}: _Actor._report_exception{params} changed; update actors/worker._wrap_errors"
    )
    assert list(inspect.signature(actor_mesh.Port.__init__).parameters) == [
        "self",
        "port_ref",
        "instance",
        "rank",
    ], f"{MONARCH}: Port(port_ref, instance, rank) changed; update actors/worker"
    source = inspect.getsource(actor_mesh)
    assert "self._port_ref" in source and "def _as_rust" in source, (
        f"{MONARCH}: Port._port_ref / Instance._as_rust changed; update _introspect and actors/worker"
    )
    assert issubclass(_introspect.supervision_error_class(), RuntimeError), (
        f"{MONARCH}: SupervisionError moved; update _introspect.supervision_error_class"
    )
    from monarch.actor import ProcMesh

    assert callable(getattr(ProcMesh, "stop", None)), (
        f"{MONARCH}: ProcMesh.stop is gone; update actors/kernel"
    )
    from monarch.job import JobTrait, ProcessJob

    assert "kill" not in vars(ProcessJob) and callable(JobTrait.kill), (
        f"{MONARCH}: a job's kill is no longer JobTrait.kill alone; update actors/kernel._note_stops"
    )
    ref, _receiver = _introspect.open_kernel_port()
    assert type(ref).__name__ in ("PortRef", "OncePortRef"), type(ref)


def test_job_services_members():
    """The fields and functions _introspect's job-services readers use."""
    import functools

    from monarch._src.job import _job_sidecar_worker, job_sidecar, once_daemon, telemetry_config
    from monarch.job import MeshAdminConfig, ProcessJob, TelemetryConfig

    job = ProcessJob({"hosts": 1}).enable_telemetry()
    for field in ("telemetry", "admin", "mounts"):
        pin(job._components, field, "_introspect.job_services")
    pin(job._components.telemetry, "_config", "_introspect.job_services")
    pin(job._components.admin, "_config", "_introspect.job_services")
    pin(job._components.mounts, "needs_sidecar", "_introspect.job_services")
    assert _introspect.job_services(job) == {"telemetry": TelemetryConfig(), "admin": MeshAdminConfig()}
    assert _introspect.job_services(ProcessJob({"hosts": 1})) == {}
    for name in (
        "spawn_module",
        "job_sidecar_lock_path",
        "sidecar_transport_from_runtime",
        "find_job_sidecar",
    ):
        pin(job_sidecar, name, "_introspect.spawn_sidecar / sidecar_pid / remove_sidecar_files")
    apply_id = "0123abcd-0000-0000-0000-000000000000"
    assert str(job_sidecar.job_sidecar_lock_path(apply_id)) == local_records.sidecar_lock(apply_id), (
        f"{MONARCH}: the sidecar's lock moved; update jobs/local_records.sidecar_lock"
    )
    assert list(inspect.signature(job_sidecar.spawn_module).parameters)[:3] == [
        "lock_path",
        "config_key",
        "module_name",
    ]
    assert "(apply_id, runtime_transport, attach_to)" in inspect.getsource(job_sidecar.create_job_sidecar), (
        f"{MONARCH}: create_job_sidecar's config key changed; update _introspect.spawn_sidecar"
    )
    pin(once_daemon.OnceDaemon, "__init__", "_introspect.sidecar_pid")
    assert "self._pid = pid" in inspect.getsource(once_daemon.OnceDaemon.__init__)
    pin(once_daemon, "daemon_log_path", "_introspect.sidecar_log / remove_sidecar_files")
    pin(_job_sidecar_worker, "main", "_introspect.run_sidecar_worker")
    start = telemetry_config.start_telemetry_servers
    assert not isinstance(start, functools.partial)
    assert "host" in inspect.signature(start).parameters, "_introspect.bind_dashboard_to"
    assert "start_telemetry_servers(" in inspect.getsource(telemetry_config._TelemetryHandle._bootstrap)
    from monarch._src.job import job_components

    pin(job_components, "_spawn_admin", "_introspect.relay_admin_through")
    assert "telemetry_url=telemetry_url" in inspect.getsource(job_components.AdminComponent.state), (
        f"{MONARCH}: the admin no longer takes telemetry_url as a keyword; update _introspect.relay_admin_through"
    )


def test_mount_members():
    """What _introspect.mount_entries / refresh_mounts read of a job's mounts."""
    from monarch._src.job import job_components, mount_config
    from monarch.job import ProcessJob

    job = ProcessJob({"hosts": 1})
    job.remote_mount("/", mntpoint="/mnt/x", python_exe=None)
    job.gather_mount("/out", "/g")
    component = job._components.mounts
    for field in ("_mounts", "_default_python_exe", "_python_executables"):
        pin(component, field, "_introspect.mount_entries")
    for field in ("_remote_entries", "_gather_entries", "ensure_open"):
        pin(component._mounts, field, "_introspect.mount_entries / refresh_mounts")
    assert list(inspect.signature(mount_config.Mounts.ensure_open).parameters)[1:3] == [
        "apply_id",
        "host_meshes",
    ]
    assert "self._mounts.ensure_open(" in inspect.getsource(job_components.MountComponent.connect), (
        f"{MONARCH}: MountComponent.connect no longer refreshes through Mounts.ensure_open; update refresh_mounts"
    )
    assert "self._mounts_handle.refresh()" in inspect.getsource(
        importlib.import_module("monarch._src.job.job_sidecar")._JobSidecarState.handle_mounts
    )
    assert _introspect.mount_entries(job) == (
        ("mount", "/", "/mnt/x", None, True),
        ("gather", "/out", "/g", None, True),
    )
    assert _introspect.job_services(job) == {"mounts": _introspect.mount_entries(job)}


def test_debugger_members():
    """actors/worker._wrap_breakpoints inlines Monarch's remote_breakpointhook and wraps
    PdbWrapper.end_debug_session; actors/debugger.Link speaks the DebugController's socket
    protocol (what `monarch debug` uses) and sets its host/port through the environment."""
    from monarch._src.actor import actor_mesh
    from monarch._src.actor.debugger import breakpoint as hook_module
    from monarch._src.actor.debugger import debug_command, debug_controller, debug_io, debug_session
    from monarch._src.actor.debugger.pdb_wrapper import PdbWrapper
    from monarch.tools import debug_env

    where = "actors/worker._wrap_breakpoints"
    params = list(inspect.signature(PdbWrapper.__init__).parameters)
    assert params == ["self", "rank", "coords", "actor_id", "controller", "header"], (
        f"{MONARCH}: PdbWrapper{params} changed; update {where}"
    )
    pin(PdbWrapper, "end_debug_session", where)
    params = list(inspect.signature(PdbWrapper.post_mortem).parameters)
    assert params == ["self", "exc_tb"], f"{MONARCH}: PdbWrapper.post_mortem{params} changed; update {where}"
    assert "pdb_wrapper.post_mortem(exc_tb)" in inspect.getsource(actor_mesh._Actor._post_mortem_debug), (
        f"{MONARCH}: _Actor._post_mortem_debug no longer calls PdbWrapper.post_mortem; update {where}"
    )
    pin(actor_mesh, "DebugContext", where)
    pin(debug_controller, "debug_controller", where)
    hook = inspect.getsource(hook_module.remote_breakpointhook)
    assert "DebugContext.set(DebugContext(pdb_wrapper))" in hook and "set_trace(frame)" in hook, (
        f"{MONARCH}: remote_breakpointhook changed; update {where} (it inlines it)"
    )
    assert "pdb_wrapper.end_debug_session()" in inspect.getsource(actor_mesh), (
        f"{MONARCH}: the end of an endpoint no longer ends its debug session; update actors/debugger"
    )
    link = "actors/debugger.Link / _Prompt"
    assert debug_env._MONARCH_DEBUG_SERVER_HOST_ENV_VAR == "MONARCH_DEBUG_SERVER_HOST", link
    assert debug_env._MONARCH_DEBUG_SERVER_PORT_ENV_VAR == "MONARCH_DEBUG_SERVER_PORT", link
    controller = inspect.getsource(debug_controller.DebugController)
    assert '"monarch_dbg> "' in controller and "DebugCliIO(reader, writer)" in controller, (
        f"{MONARCH}: the DebugController's prompt or client IO changed; update {link}"
    )
    assert 'line == "detach"' in inspect.getsource(debug_session.DebugSession._event_loop), link
    grammar = inspect.getsource(debug_command._get_debug_input_parser)
    assert 'cast: "cast" _WS actor_name ranks pdb_command' in grammar and "attach:" in grammar, link
    assert "readline()" in inspect.getsource(debug_io.DebugCliIO.input), link


def test_process_job_logs_each_workers_exit_code_as_chatter_reads_it():
    """``chatter._WorkerExits`` reads ProcessJob's waiter log record: its logger, its message's
    start and its first two args (pid, return code); a worker's cause of death depends on it."""
    from monarch._src.job import process

    source = inspect.getsource(process.ProcessJob._watch_process)
    assert process.logger.name == _quiet._PROCESS_LOGGER
    assert '"ProcessJob: worker died unexpectedly pid=%d exit_code=%d' in source, source
    assert "proc.wait()" in source and "code = proc.returncode" in source
    record = logging.LogRecord(
        _quiet._PROCESS_LOGGER,
        logging.WARNING,
        __file__,
        1,
        "ProcessJob: worker died unexpectedly pid=%d exit_code=%d mesh=%s",
        (424242, -9, "m"),
        None,
    )
    _quiet._WorkerExits().filter(record)
    assert _quiet.worker_exit(424242) == -9
