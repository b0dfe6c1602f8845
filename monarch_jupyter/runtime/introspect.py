"""Facts about a job that Monarch's public API does not expose.

This module is the only reader of Monarch's private fields; everything else asks
it one fact at a time. ``JobTrait`` has no public way to list worker PIDs, the
meshes a ``ProcessJob`` was built with (``_meshes``, ``_env``), the host meshes of
a ``JobState`` as a mapping (``_hosts``), the allocation behind a cached job
(``_running``) or whether it still answers (``_is_running``), an SSHJob's ssh
arguments, Python, port and transport, or the classes ``monarch.job`` does not
export, the PortRef behind a Port a proc can send to, and the per-proc setup hook
(``SetupActor``) actors/ installs its collection with. We read those here and degrade to "unknown" (None / {}) for job classes
that lack them. What to make of these facts per kind of job is ``engines/``'s part.
``tests/integration/test_introspect_pins.py`` pins every field against the installed
torchmonarch, so an upgrade that renames one fails there, by name.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any


def running_job(job: Any) -> Any | None:
    """The job object that holds the allocation (JobTrait._running), or None."""
    return getattr(job, "_running", None)


def host_meshes(state: Any) -> dict[str, Any]:
    """Mesh name → HostMesh of a connected JobState, in spec order (``JobState._hosts``)."""
    return dict(getattr(state, "_hosts", None) or {})


def bare_host_meshes(job: Any) -> dict[str, Any]:
    """Mesh name → HostMesh of a running job, attached without its components
    (``_running._state()._hosts``): ``JobTrait.state()`` would also start the job's services
    (admin, telemetry sink) in the caller, which a rank shell must not own."""
    running = running_job(job)
    if running is None:
        return {}
    return dict(getattr(running._state(), "_hosts", None) or {})


def declared_meshes(job: Any) -> dict[str, Any] | None:
    """Mesh name → what the job was built with (``_meshes``): a host count (ProcessJob,
    SlurmJob), host names (SSHJob) or a config dict (KubernetesJob); else None."""
    meshes = getattr(job, "_meshes", None)
    return dict(meshes) if isinstance(meshes, dict) else None


def _declared_count(value: Any) -> int | None:
    """A ``_meshes`` value as a host count. ProcessJob/SlurmJob: a count; SSHJob
    (LoginJob): a list of host names; KubernetesJob: a config dict with ``num_replicas``."""
    if isinstance(value, (list, tuple)):
        return len(value)
    if isinstance(value, dict):
        value = value.get("num_replicas")
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def worker_env(job: Any) -> dict[str, str] | None:
    """Extra worker environment a ProcessJob was built with (``_env``), else None."""
    return getattr(job, "_env", None) or None


def set_worker_env(job: Any, env: dict[str, str] | None) -> None:
    """Replace the extra environment a ProcessJob passes to every worker it starts (``_env``)."""
    job._env = env


def watch_worker_spawns(job: Any, on_spawn: Callable[[int], None]) -> Callable[[], None]:
    """Call ``on_spawn(pid)`` for each worker a ProcessJob starts, right after its Popen;
    returns a function that removes the hook (before the job is pickled).

    ``ProcessJob._create`` calls ``self._watch_process(proc, mesh, rank, addr)`` after each
    Popen (monarch/_src/job/process.py): the one point where a worker's PID exists before
    the apply returns. An instance attribute shadows the staticmethod for one apply only.
    An exception raised by ``on_spawn`` stops the spawn loop.
    """
    original = type(job)._watch_process

    def watch(proc: Any, mesh_name: str, rank: int, addr: str) -> None:
        try:
            on_spawn(proc.pid)  # recorded first: a kernel killed right now still leaves the PID
        finally:
            original(proc, mesh_name, rank, addr)

    job._watch_process = watch

    def unhook() -> None:
        if "_watch_process" in vars(job):
            del job._watch_process

    return unhook


def mesh_sizes(job: Any, host_meshes: dict[str, Any] | None) -> dict[str, int | None]:
    """Mesh name → host count, from the ProcessJob spec or the connected meshes."""
    meshes = declared_meshes(running_job(job) or job)
    if meshes is not None:
        return {str(k): _declared_count(v) for k, v in meshes.items()}
    return {name: _host_count(mesh) for name, mesh in (host_meshes or {}).items()}


def _host_count(mesh: Any) -> int | None:
    try:
        return int(mesh.extent.nelements)
    except (AttributeError, TypeError, ValueError):  # not a HostMesh we can size: unknown
        return None


def worker_pids(job: Any) -> dict[str, int]:
    """Host key → local PID (``_host_to_pid``): ``<mesh>_<i>`` → worker for ProcessJob,
    host name → ssh client for SSHJob (Monarch keys those by host); else {}."""
    table = getattr(running_job(job) or job, "_host_to_pid", None)
    if not isinstance(table, dict):
        return {}
    pids = {key: getattr(value, "pid", None) for key, value in table.items()}
    return {key: pid for key, pid in pids.items() if isinstance(pid, int) and pid}


def urls(job: Any, state: Any | None) -> dict[str, str | None]:
    """Telemetry / dashboard / admin URLs of a connected JobState, when present."""
    return {
        key: getattr(state, f"{key}_url", None) if state is not None else None
        for key in ("telemetry", "dashboard", "admin")
    }


def is_running(job: Any) -> bool:
    """Whether the job's allocation still answers (``JobTrait._running._is_running()``).

    Judging the job's processes on this machine first is the engine's part
    (``Engine.is_alive``)."""
    running = running_job(job)
    if running is None:
        return False
    try:
        return bool(running._is_running())
    except Exception:
        # A probe that cannot reach the allocation (scheduler CLI failing, host
        # not answering) means we cannot use it: "not running"; callers keep the cache.
        return False


# ── SSHJob (monarch._src.job.job, not exported): its constructor's arguments ──
# Read by engines/ssh.py to probe the hosts with the job's own ssh and Python, and to
# check the worker port; Monarch has no public accessor for any of them.
def ssh_args(job: Any) -> tuple[str, ...]:
    """The ssh arguments an SSHJob starts its clients with (``_ssh_args``)."""
    return tuple(getattr(job, "_ssh_args", ()) or ())


def set_ssh_args(job: Any, args: tuple[str, ...]) -> None:
    """Replace them before apply (``_ssh_args``; compared by ``SSHJob.can_run``)."""
    job._ssh_args = args


def python_exe(job: Any) -> str:
    """The Python an SSHJob runs on each host (``_python_exe``)."""
    return str(getattr(job, "_python_exe", "python"))


def worker_port(job: Any) -> int:
    """The port every worker of an SSHJob listens on (``_port``)."""
    return int(getattr(job, "_port", 0) or 0)


def transport(job: Any) -> str:
    """An SSHJob's transport name (``_transport``), "tcp" by default."""
    return str(getattr(job, "_transport", "tcp"))


def enable_transport(name: str) -> None:
    """Enable a transport in this process; an unpickled SSHJob has no ``__setstate__`` doing it.

    Private module: the public ``monarch.actor.enable_transport`` is the same function."""
    from monarch._src.actor.actor_mesh import enable_transport as enable

    enable(name)


def ssh_job_class() -> type:
    """Monarch's SSHJob, which ``monarch.job`` does not export."""
    from monarch._src.job.job import SSHJob

    return SSHJob


def batch_job_class() -> type:
    """Monarch's BatchJob (what LocalJob's batch mode pickles), not exported either."""
    from monarch._src.job.job import BatchJob

    return BatchJob


class PortReader:
    """Reads a Monarch ``PortReceiver`` from the running asyncio loop: ``next()`` is an asyncio
    future of the next raw message, ``value(raw)`` what ``receiver.recv()`` would have given.

    ``recv()`` wraps the Rust receive (``_receiver.recv_task()``) in a Python coroutine that a
    tokio thread steps under the GIL, so each message took one more thread hop; this awaits the
    Rust task directly and decodes on the loop (``_process``), which is faster
    (``benchmarks/bench_wire.py``; the figure is in benchmarks/README.md). Falls back to
    ``recv()`` when the private fields are not there."""

    def __init__(self, receiver: Any) -> None:
        self._receiver = receiver
        self._fast = None
        try:
            from monarch._src.actor.future import Future

            rust = receiver._receiver
            if callable(getattr(rust, "recv_task", None)) and callable(getattr(receiver, "_process", None)):
                self._fast = (Future._from_coro, rust.recv_task)
        except (ImportError, AttributeError):
            pass

    def next(self) -> Any:
        import asyncio

        if self._fast is None:
            return asyncio.ensure_future(self._receiver.recv().as_asyncio())
        from_task, recv_task = self._fast
        return asyncio.ensure_future(from_task(recv_task()).as_asyncio())

    def value(self, raw: Any) -> Any:
        return raw if self._fast is None else self._receiver._process(raw)


def open_kernel_port() -> tuple[Any, Any]:
    """A channel into this process: (the ``PortRef`` procs send to, its receiver). Monarch's
    public ``Channel.open`` gives a Port; procs build their own Port from the ref
    (``Port._port_ref``, read here)."""
    from monarch.actor import Channel

    port, receiver = Channel.open()
    return port._port_ref, receiver


def supervision_error_class() -> type:
    """Monarch's ``SupervisionError`` (a call on a mesh whose proc died raises it); ``monarch.actor``
    does not export it: it lives in the Rust bindings."""
    from monarch._rust_bindings.monarch_hyperactor.supervision import SupervisionError

    return SupervisionError


def register_proc_startup(function: Callable[[], Any]) -> None:
    """Have ``function`` called in the kernel at every proc mesh spawn; what it returns is run on
    each new proc (``SetupActor.register_startup_function``; monarch.actor does not export it)."""
    from monarch._src.actor.proc_mesh import SetupActor

    SetupActor.register_startup_function(function)


# ── job services (JobTrait._components, monarch._src.job): telemetry, admin, mounts, the sidecar ──
# JobTrait has enable_telemetry()/enable_admin() but no way to ask which services a job was
# configured with, nor to start its sidecar process any other way than Monarch's own (which
# shares the kernel's process group and binds the dashboard on "::").
def job_services(job: Any) -> dict[str, Any]:
    """The services ``job`` is configured with: ``telemetry`` → its TelemetryConfig, ``admin`` →
    its MeshAdminConfig, ``mounts`` → its :func:`mount_entries` when it has any."""
    components = getattr(job, "_components", None)
    found: dict[str, Any] = {}
    if components is None:
        return found
    telemetry = getattr(components, "telemetry", None)
    if telemetry is not None:
        found["telemetry"] = getattr(telemetry, "_config", None)
    admin = getattr(components, "admin", None)
    if admin is not None:
        found["admin"] = getattr(admin, "_config", None)
    mounts = mount_entries(job)
    if mounts:
        found["mounts"] = mounts
    return found


MountEntry = tuple[str, str, "str | None", "tuple[str, ...] | None", bool]


def mount_entries(job: Any) -> tuple[MountEntry, ...]:
    """The mounts configured on ``job`` (``MountComponent._mounts``' declarative entries; Monarch
    lists them nowhere public) as ``(kind, source, target, meshes, plain)``: kind ``mount``
    (``remote_mount``: source here, mount point on the workers, None: the source's path) or
    ``gather`` (``gather_mount``: the workers' path, the mount point here); ``plain`` when no
    other option was given (no ``remotemount`` kwargs, no mount's Python for the workers)."""
    component = getattr(getattr(job, "_components", None), "mounts", None)
    mounts = getattr(component, "_mounts", None)
    if mounts is None:
        return ()
    no_python = not getattr(component, "_default_python_exe", None) and not getattr(
        component, "_python_executables", None
    )
    found: list[MountEntry] = []
    for entry in getattr(mounts, "_remote_entries", ()):
        meshes = tuple(entry.meshes) if entry.meshes is not None else None
        found.append(("mount", entry.source, entry.mntpoint, meshes, no_python and not entry.kwargs))
    for entry in getattr(mounts, "_gather_entries", ()):
        meshes = tuple(entry.meshes) if entry.meshes is not None else None
        found.append(("gather", str(entry.remote_mount_point), entry.local_mount_point, meshes, True))
    return tuple(found)


def refresh_mounts(job: Any, state: Any) -> None:
    """Re-sync ``job``'s live remote mounts with their sources (the sidecar re-walks each source
    and swaps the new tree in; gather mounts follow their sources by themselves). Monarch does
    this only inside ``state()``, which also re-runs every other service's hooks: this is its
    mount step alone, ``MountComponent.connect``'s ``Mounts.ensure_open``."""
    component = job._components.mounts
    component._mounts.ensure_open(job.apply_id, host_meshes(state))


def sidecar_pid(apply_id: str) -> int | None:
    """PID of the job sidecar of ``apply_id`` while its lock is held (``OnceDaemon._pid``), else None."""
    from monarch._src.job.job_sidecar import find_job_sidecar

    daemon = find_job_sidecar(apply_id)
    pid = getattr(daemon, "_pid", None)
    return pid if isinstance(pid, int) and pid > 0 else None


def spawn_sidecar(apply_id: str, module: str) -> int:
    """Start the job sidecar of ``apply_id`` as ``python -m module`` under Monarch's own lock and
    key (``create_job_sidecar``'s, unattached), so Monarch's ``get_job_sidecar`` finds and uses
    it; returns its PID. ``module`` must end by running Monarch's ``_job_sidecar_worker``."""
    from monarch._src.job import job_sidecar

    transport = job_sidecar.sidecar_transport_from_runtime()
    daemon = job_sidecar.spawn_module(
        job_sidecar.job_sidecar_lock_path(apply_id),
        (apply_id, transport, None),
        module,
        runtime_transport=transport,
        attach_to=None,
        process_name="job_sidecar",
    )
    return int(daemon._pid)


def sidecar_log(apply_id: str) -> str:
    """The file Monarch's sidecar of ``apply_id`` writes its output to."""
    from monarch._src.job.job_sidecar import job_sidecar_lock_path
    from monarch._src.job.once_daemon import daemon_log_path

    return str(daemon_log_path(job_sidecar_lock_path(apply_id)))


def remove_sidecar_files(apply_id: str) -> None:
    """Unlink the lock record and log Monarch's sidecar of ``apply_id`` leaves in /tmp once it has
    exited (``OnceDaemon`` never removes them: one pair per job ever applied); a sidecar still
    holding its lock keeps them."""
    from monarch._src.job.job_sidecar import find_job_sidecar, job_sidecar_lock_path
    from monarch._src.job.once_daemon import daemon_log_path

    lock = job_sidecar_lock_path(apply_id)
    if not os.path.isfile(lock) or find_job_sidecar(apply_id) is not None:  # never open a FIFO
        return
    for path in (lock, daemon_log_path(lock)):
        with contextlib.suppress(OSError):
            os.unlink(path)


def bind_dashboard_to(host: str) -> None:
    """In the sidecar process: have the telemetry handle start its dashboard server on ``host``
    (``telemetry_config.start_telemetry_servers`` takes a host; Monarch passes none: "::")."""
    import functools

    from monarch._src.job import telemetry_config

    telemetry_config.start_telemetry_servers = functools.partial(
        telemetry_config.start_telemetry_servers, host=host
    )


def relay_admin_through(path: str) -> None:
    """Have every mesh admin this process spawns reach the telemetry store at ``<its URL><path>``
    (``job_components._spawn_admin(…, telemetry_url=…)``; the admin relays ``/v1/query`` there,
    so the store can tell the relay apart). Once per process; Monarch's other clients keep the URL."""
    from monarch._src.job import job_components

    original = job_components._spawn_admin
    if getattr(original, "_relayed_through", None) == path:
        return

    def spawn(*args: Any, telemetry_url: str | None = None, **kwargs: Any) -> Any:
        if telemetry_url:
            telemetry_url = telemetry_url.rstrip("/") + path
        return original(*args, telemetry_url=telemetry_url, **kwargs)

    spawn._relayed_through = path  # type: ignore[attr-defined]
    job_components._spawn_admin = spawn


def run_sidecar_worker() -> None:
    """Run Monarch's sidecar entry point (``_job_sidecar_worker.main``) with this ``sys.argv``."""
    from monarch._src.job._job_sidecar_worker import main

    main()
