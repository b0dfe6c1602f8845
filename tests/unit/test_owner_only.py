"""#42: the sidecar's servers answer this user alone (peer uid from /proc/net/tcp) and take SQL
only from this user's own clients, not the mesh admin's relay."""

from __future__ import annotations

import os
import socket

from monarch_jupyter.jobs.services import _sidecar_main as main
from monarch_jupyter.system import procfs

TABLE = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 100 1 0
   1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1001        0 101 1 0
   2: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 102 1 0
"""


def test_the_clients_socket_names_its_user():
    assert procfs.parse_peer_uid(TABLE, ("127.0.0.1", 0xC350), ("127.0.0.1", 0x1F90)) == 1001
    assert procfs.parse_peer_uid(TABLE, ("127.0.0.1", 0xC351), ("127.0.0.1", 0x1F90)) is None


def test_a_real_loopback_connection_is_ours():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    try:
        assert procfs.peer_uid(accepted) == os.getuid()
        assert main.owner_only(None, accepted, None) is True
    finally:
        for s in (accepted, client, server):
            s.close()


def test_a_socket_that_is_not_tcp_is_refused_with_one_line():
    ours, theirs = socket.socketpair()
    try:
        theirs.sendall(b"POST /api/query HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
        assert main.owner_only(None, ours, None) is False
        assert b"403" in theirs.recv(4096)
    finally:
        ours.close()
        theirs.close()


def test_sql_the_admin_relays_is_refused_and_the_rest_served():
    seen = []

    def app(environ, start_response):
        start_response("200 OK", [])
        seen.append(environ["PATH_INFO"])
        return [b"ok"]

    guarded = main.no_sql_from_the_admin(app)
    status = []
    body = guarded({"PATH_INFO": f"{main.ADMIN_RELAY}/api/query"}, lambda s, h: status.append(s))
    assert status == ["403 Forbidden"] and b"relay is refused" in b"".join(body)
    guarded({"PATH_INFO": "/api/query"}, lambda s, h: None)  # %job query, profile, snapshots
    guarded({"PATH_INFO": f"{main.ADMIN_RELAY}/api/pyspy_dump"}, lambda s, h: None)
    assert seen == ["/api/query", "/api/pyspy_dump"]


def test_netlink_and_proc_agree_on_a_real_connection():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    try:
        peer, own = accepted.getpeername(), accepted.getsockname()
        assert procfs.diag_uid(peer, own) == os.getuid()
        with open("/proc/net/tcp") as table:
            assert procfs.parse_peer_uid(table.read(), peer, own) == os.getuid()
        assert procfs.diag_uid(("127.0.0.1", 1), own) is None  # no such socket
    finally:
        for s in (accepted, client, server):
            s.close()
