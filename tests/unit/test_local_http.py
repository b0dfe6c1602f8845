"""services/local_http.py: the one bounded request to a job service on loopback, against a real
HTTP http_service on 127.0.0.1 (a thread of this test)."""

from __future__ import annotations

import http.server
import socket
import threading
import urllib.error

import pytest

from monarch_jupyter.jobs.services import local_http


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/fail":
            self.send_error(500, "broken")
            return
        body = b"x" * int(self.path.strip("/") or 0)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_service():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def test_an_answer_within_the_bound(http_service):
    assert local_http.fetch(f"{http_service}/10", 5, 10) == ("application/json", b"x" * 10)


def test_an_answer_over_the_bound_is_refused(http_service):
    with pytest.raises(local_http.TooLarge):
        local_http.fetch(f"{http_service}/11", 5, 10)


def test_an_error_status_reaches_the_caller(http_service):
    with pytest.raises(urllib.error.HTTPError) as raised:
        local_http.fetch(f"{http_service}/fail", 5, 10)
    assert raised.value.code == 500


def test_a_closed_port_is_unanswered():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    with pytest.raises(local_http.Unanswered) as raised:
        local_http.fetch(f"http://127.0.0.1:{port}/", 5, 10)
    assert "refused" in str(raised.value).lower()


def test_a_silent_server_times_out():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()  # accepts, never answers
        with pytest.raises(local_http.Unanswered):
            local_http.fetch(f"http://127.0.0.1:{s.getsockname()[1]}/", 0.3, 10)
