"""Monarch's job services (telemetry, mesh admin, dashboard) as a notebook uses them.

- :func:`configure` turns ``--telemetry`` / ``--admin`` into Monarch's ``enable_telemetry`` /
  ``enable_admin`` on a job; :func:`spec_services` says which of them a job's saved spec can
  re-create (None: it cannot, the job stays kernel-only); :mod:`.mounts` does the same for
  ``--mount`` / ``--gather``.
- :func:`loopback` binds the mesh admin on loopback whatever the job asked for;
  :mod:`.sidecar` starts the job's sidecar (telemetry store, dashboard) in its own session,
  with its dashboard on loopback too.
"""

from __future__ import annotations

from typing import Any

from ...runtime import introspect as _introspect

TELEMETRY = "telemetry"
ADMIN = "admin"
#: The services a spec may name, in the order they are written.
NAMES = (TELEMETRY, ADMIN)
#: Where the mesh admin server listens: an ephemeral port on loopback (Monarch's default is *:1729).
ADMIN_ADDR = "127.0.0.1:0"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
#: The path the mesh admin reaches the telemetry store under: the store refuses SQL there (the
#: admin relays ``/v1/query`` for any local user) and serves the rest as at its root.
ADMIN_RELAY = "/monarch-jupyter-admin-relay"


def configure(job: Any, names: tuple[str, ...]) -> Any:
    """Enable ``names`` on ``job`` (Monarch's defaults; admin on loopback); returns ``job``."""
    from monarch.job import MeshAdminConfig, TelemetryConfig

    if TELEMETRY in names:
        job.enable_telemetry(TelemetryConfig(), mesh_admin_config=MeshAdminConfig(admin_addr=ADMIN_ADDR))
    elif ADMIN in names:
        job.enable_admin(MeshAdminConfig(admin_addr=ADMIN_ADDR))
    return job


def configured(job: Any) -> tuple[str, ...]:
    """The services ``job`` is configured with, in :data:`NAMES` order (mounts too, last)."""
    found = _introspect.job_services(job)
    return tuple(name for name in (*NAMES, "mounts") if name in found)


def spec_services(job: Any) -> tuple[str, ...] | None:
    """The service names a ``--local`` spec needs to re-create ``job``'s services, or None when
    its configuration is one a spec cannot say (a non-default telemetry config); mounts are
    :func:`.mounts.spec_mounts`' part."""
    from monarch.job import MeshAdminConfig, TelemetryConfig

    found = _introspect.job_services(job)
    admin = found.get(ADMIN)
    if admin is not None and admin not in (MeshAdminConfig(), MeshAdminConfig(admin_addr=ADMIN_ADDR)):
        return None
    if TELEMETRY in found:
        return (TELEMETRY,) if found[TELEMETRY] == TelemetryConfig() else None
    return (ADMIN,) if ADMIN in found else ()


def is_loopback(addr: str) -> bool:
    """Whether a ``host:port`` bind address is on loopback."""
    host = addr.rpartition(":")[0] if ":" in addr else addr
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def loopback(job: Any) -> list[str]:
    """Bind ``job``'s mesh admin on loopback (an ephemeral port) unless it already is; notes."""
    from monarch.job import MeshAdminConfig

    admin = _introspect.job_services(job).get(ADMIN)
    if admin is None:
        return []
    addr = getattr(admin, "admin_addr", None)
    if addr is not None and is_loopback(addr):
        return []
    job.enable_admin(MeshAdminConfig(admin_addr=ADMIN_ADDR))
    if addr is None:
        return []  # Monarch's default (*:1729) was never the user's choice: no note
    return [f"the mesh admin listens on {ADMIN_ADDR} instead of {addr}: no port is opened to other machines"]


def reach(names: tuple[str, ...] | list[str]) -> str | None:
    """Who can talk to the job's services (the ``reach`` row's second part), or None without any.

    The sidecar's servers (telemetry store, dashboard) serve only connections this user opened
    (:mod:`._sidecar_main`); Monarch 0.7's mesh admin runs in the kernel, in Rust, and checks no
    peer: its tree and py-spy routes answer any local user (its SQL relay is refused)."""
    parts = []
    if TELEMETRY in names:
        parts.append("telemetry and dashboard: you only")
    if ADMIN in names:
        parts.append("mesh admin (tree, py-spy): any local user, Monarch 0.7 checks no peer")
    return "; ".join(parts) or None


#: The apply id of the job whose mesh admin this process started (Monarch 0.7 spawns the admin
#: actor under one fixed name per client process: a second one fails, "already spawned").
_admin_of: str | None = None


def relay_admin() -> None:
    """Before a job's services start in this process: its mesh admin reaches the store under
    :data:`ADMIN_RELAY` (see ``_sidecar_main.no_sql_from_the_admin``)."""
    _introspect.relay_admin_through(ADMIN_RELAY)


def started(job: Any) -> None:
    """Record that ``job``'s services are up in this process (after a start or a re-attach)."""
    global _admin_of
    if ADMIN in _introspect.job_services(job) and isinstance(getattr(job, "apply_id", None), str):
        _admin_of = job.apply_id


def start_refusal(job: Any) -> str | None:
    """Why ``job`` (about to be started here) cannot bring up its services in this process, or None."""
    if ADMIN not in _introspect.job_services(job) or _admin_of is None:
        return None
    return (
        f"this kernel already ran the mesh admin of job {_admin_of}, and Monarch 0.7 starts one per "
        "process: %job kill, restart the kernel, then %job apply again"
    )
