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


class _Unsized(http.server.BaseHTTPRequestHandler):
    """Answers ``/N`` with N bytes and no Content-Length (read until the connection closes)."""

    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        size = int(self.path.strip("/"))
        try:
            for start in range(0, size, 1 << 16):
                self.wfile.write(b"y" * min(1 << 16, size - start))
        except OSError:
            pass

    def log_message(self, *args: object) -> None:
        pass


def test_an_unsized_answer_is_read_in_chunks_and_dropped_over_the_bound():
    import gc

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Unsized)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        assert local_http.fetch(f"{url}/300000", 5, 300000)[1] == b"y" * 300000
        with pytest.raises(local_http.TooLarge) as raised:
            local_http.fetch(f"{url}/5000000", 5, 3 << 20)
        gc.collect()
        # #42: the kept error holds no buffer of the answer (IPython keeps the last error)
        frames = []
        tb = raised.value.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == local_http.__file__:
                frames.append(tb.tb_frame)
            tb = tb.tb_next
        assert frames
        held = [v for f in frames for v in f.f_locals.values() if isinstance(v, (bytes, bytearray, list))]
        assert sum(len(v) for v in held if isinstance(v, (bytes, bytearray))) < 1 << 20, [
            len(v) for v in held
        ]
        assert all(len(v) == 0 for v in held if isinstance(v, list))
    finally:
        httpd.shutdown()
        httpd.server_close()
