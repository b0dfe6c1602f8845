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

#: The dashboard's bind host (Monarch's is "::", every interface).
DASHBOARD_HOST = "127.0.0.1"
#: User-Agents SQL is taken from: urllib (``%job query``, Monarch's own QueryEngineClient) and
#: tornado (the Jupyter server's dashboard proxy, which only its authenticated user reaches).
SQL_CLIENTS = ("Python-urllib/", "Tornado/")
SQL_REFUSED = "SQL is taken only from this user's own clients (%job query), not relayed by the mesh admin"
#: What another user's connection is told before it is closed (one line).
REFUSED = (
    b"HTTP/1.0 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
    b"this Monarch job service answers only the user who started the job\n"
)


def owner_only(server: Any, request: Any, client_address: Any) -> bool:
    """``socketserver``'s ``verify_request``: a connection is served only when /proc/net/tcp says
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


def sql_from_clients_only(app: Any) -> Any:
    """``app`` refusing SQL (``/api/query``) that the mesh admin forwards: Monarch 0.7's admin
    (Rust, in the kernel, no peer check) relays ``/v1/query`` from whoever reaches its port, and
    reaches us as this user. This user's clients name themselves (:data:`SQL_CLIENTS`); the
    admin's relay sends no User-Agent."""

    def guarded(environ: dict[str, Any], start_response: Any) -> Any:
        path = str(environ.get("PATH_INFO", "")).rstrip("/")
        agent = str(environ.get("HTTP_USER_AGENT", ""))
        if path == "/api/query" and not agent.startswith(SQL_CLIENTS):
            body = json.dumps({"error": f"{SQL_REFUSED} (user agent {agent!r})"}).encode()
            start_response("403 Forbidden", [("Content-Type", "application/json")])
            return [body]
        return app(environ, start_response)

    return guarded


def guard_servers() -> None:
    """Every werkzeug server of this process (Monarch's telemetry API and dashboard, both
    ``werkzeug.serving.make_server``) verifies its peer's user before serving it, and takes SQL
    only from this user's own clients."""
    from werkzeug.serving import BaseWSGIServer

    original = BaseWSGIServer.__init__

    def init(self: Any, host: str, port: int, app: Any, *args: Any, **kwargs: Any) -> None:
        original(self, host, port, sql_from_clients_only(app), *args, **kwargs)

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
