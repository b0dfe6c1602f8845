"""The job sidecar process: leave the kernel's session, bind the dashboard on loopback, answer
only this user, then run Monarch's own sidecar (``python -m`` with Monarch's arguments; see
:mod:`.sidecar`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
from typing import Any

from ...runtime import introspect as _introspect
from ...system import procfs as _procfs
from . import ADMIN_RELAY

#: The dashboard's bind host (Monarch's is "::", every interface).
DASHBOARD_HOST = "127.0.0.1"
SQL_REFUSED = "the mesh admin's SQL relay is refused: it answers any local user; use %job query"
#: What another user's connection is told before it is closed (one line).
REFUSED = (
    b"HTTP/1.0 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
    b"this Monarch job service answers only the user who started the job\n"
)


def owner_only(server: Any, request: Any, client_address: Any) -> bool:
    """``socketserver``'s ``verify_request``: a connection is served only when the kernel says
    this user opened it (loopback has no other credentials; an unknown peer is refused too)."""
    if _procfs.peer_uid(request) == os.getuid():
        return True
    with contextlib.suppress(OSError):
        _drain(request)  # closing on unread input resets it: the client would never see the 403
        request.sendall(REFUSED)
    return False


def _drain(request: Any, limit: int = 65536, grace: float = 0.3) -> None:
    """Read the refused request (its headers and the body they announce, at most ``limit``
    bytes, for at most ``grace`` seconds: the accept loop waits on it)."""
    import time

    deadline, seen = time.monotonic() + grace, b""
    while len(seen) < limit:
        head, sep, body = seen.partition(b"\r\n\r\n")
        if sep:
            length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
            if len(body) >= (int(length[1]) if length else 0):
                return
        left = deadline - time.monotonic()
        if left <= 0:
            return
        request.settimeout(left)
        chunk = request.recv(limit - len(seen))
        if not chunk:
            return
        seen += chunk


def no_sql_from_the_admin(app: Any) -> Any:
    """``app`` refusing the SQL the mesh admin relays: Monarch 0.7's admin (Rust, in the kernel,
    no peer check) forwards ``/v1/query`` from whoever reaches its port, and reaches us as this
    user. The kernel gives the admin the store's URL under :data:`ADMIN_RELAY`
    (``introspect.relay_admin_through``): under it, everything but SQL is served as usual."""

    def guarded(environ: dict[str, Any], start_response: Any) -> Any:
        path = str(environ.get("PATH_INFO", ""))
        if path == ADMIN_RELAY or path.startswith(ADMIN_RELAY + "/"):
            rest = path[len(ADMIN_RELAY) :] or "/"
            if rest.rstrip("/") == "/api/query":
                body = json.dumps({"error": SQL_REFUSED}).encode()
                start_response("403 Forbidden", [("Content-Type", "application/json")])
                return [body]
            environ = {**environ, "PATH_INFO": rest}
        return app(environ, start_response)

    return guarded


def guard_servers() -> None:
    """Every werkzeug server of this process (Monarch's telemetry API and dashboard, both
    ``werkzeug.serving.make_server``) verifies its peer's user before serving it, and refuses
    the SQL the mesh admin relays."""
    from werkzeug.serving import BaseWSGIServer

    original = BaseWSGIServer.__init__

    def init(self: Any, host: str, port: int, app: Any, *args: Any, **kwargs: Any) -> None:
        original(self, host, port, no_sql_from_the_admin(app), *args, **kwargs)

    BaseWSGIServer.__init__ = init  # type: ignore[method-assign]
    BaseWSGIServer.verify_request = owner_only  # type: ignore[method-assign,assignment]


def main() -> None:
    # A kernel restart (killpg of the kernel's group) must not reach it; EPERM: already a leader.
    with contextlib.suppress(OSError):
        os.setsid()
    # Monarch binds the sidecar's control socket in /tmp with the umask's mode: whoever can
    # write it can shut the sidecar down or ask it for mounts. Ours alone, whatever the user's umask.
    os.umask(0o077)
    _introspect.bind_dashboard_to(DASHBOARD_HOST)
    guard_servers()
    _introspect.run_sidecar_worker()


if __name__ == "__main__":
    main()
