"""Monarch's dashboard through the Jupyter server: a real ``jupyter server`` with our extension
and a real telemetry job's sidecar; the token is required, nothing listens beyond loopback."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from browser_util import SERVER, free_port, jupyter_server
from harness import held_sidecar_lock, job_kernel, poll, tagged_pids
from monarch_jupyter._server.dashboard import MAX_RESPONSE_BYTES
from monarch_jupyter.system import procfs as _procfs

pytestmark = pytest.mark.kernel

TOKEN = secrets.token_hex(16)
PREFIX = "/monarch-jupyter/dashboard/nb/.monarch/default"
LOOPBACK = ("127.0.0.1", "::1")
TIMEOUT = 3  # c.MonarchJupyter.dashboard_timeout of the test server


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def fetch(
    url: str, token: str | None = TOKEN, accept: str = "*/*", data: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=data, headers={"Accept": accept})
    if token:
        request.add_header("Authorization", f"token {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.build_opener(_NoRedirect).open(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("dash-root")


@pytest.fixture(scope="module")
def tkernel(root):
    with job_kernel(root / "nb", "hosts=2 --telemetry") as kernel:
        yield kernel


@pytest.fixture(scope="module")
def server(root, tkernel, tmp_path_factory):
    home = tmp_path_factory.mktemp("dash-home")
    timeout = f"--MonarchJupyter.dashboard_timeout={TIMEOUT}"
    with jupyter_server(root, home, ui=SERVER, extra=(timeout,), token=TOKEN) as started:
        yield started.url, started.proc


def test_the_dashboard_page_and_its_assets_come_through_with_the_token(server):
    base, _ = server
    code, headers, body = fetch(f"{base}{PREFIX}/", accept="text/html")
    assert code == 200, body[:500]
    page = body.decode()
    assert "<title>Monarch Dashboard</title>" in page
    assert f'src="{PREFIX}/static/js/main.js"' in page and f'href="{PREFIX}/static/css/main.css"' in page
    assert "frame-ancestors 'self'" in headers.get("Content-Security-Policy", "")
    code, headers, script = fetch(f"{base}{PREFIX}/static/js/main.js")
    assert code == 200 and len(script) > 100_000 and "javascript" in headers["Content-Type"]
    code, _, summary = fetch(f"{base}{PREFIX}/api/summary")
    assert code == 200, summary[:500]
    assert isinstance(json.loads(summary), dict)


def test_a_post_goes_through_too(server):
    base, _ = server
    code, _, body = fetch(f"{base}{PREFIX}/api/query", data=json.dumps({"sql": "SELECT 1 AS one"}).encode())
    assert code == 200, body[:500]
    assert "one" in body.decode()


def test_refused_without_the_token(server):
    base, _ = server
    for token in (None, "wrong"):
        code, headers, _ = fetch(f"{base}{PREFIX}/", token=token, accept="text/html")
        assert code in (302, 401, 403), code
        if code == 302:
            assert "/login" in headers["Location"]
        code, _, _ = fetch(f"{base}{PREFIX}/api/summary", token=token)
        assert code in (302, 401, 403)
        code, _, _ = fetch(f"{base}{PREFIX}/api/query", token=token, data=b"{}")
        assert code in (401, 403)


def test_no_trailing_slash_redirects_under_the_prefix(server):
    base, _ = server
    code, headers, _ = fetch(f"{base}{PREFIX}?x=1")
    assert code in (301, 302) and headers["Location"] == f"{PREFIX}/?x=1"


def _context(root: Path, name: str, urls: dict | None, state: str = "running", apply_id: str = "") -> str:
    ctx = root / "other" / ".monarch" / name
    ctx.mkdir(parents=True, exist_ok=True)
    if urls is not None:
        status = {"context": name, "state": state, "urls": urls, "apply_id": apply_id or name}
        (ctx / "status.json").write_text(json.dumps(status))
    return f"/monarch-jupyter/dashboard/other/.monarch/{name}/"


def test_clear_one_line_errors(server, root):
    base, _ = server
    dead = free_port()  # nothing listens there
    cases = {
        _context(root, "nojob", None): (404, "%job apply"),
        _context(root, "notelemetry", {"telemetry": None}, state="running"): (404, "no dashboard"),
        _context(root, "foreign", {"telemetry": "http://192.0.2.1:80"}): (403, "not on loopback"),
        _context(root, "down", {"telemetry": f"http://127.0.0.1:{dead}"}): (502, "nothing listens"),
        "/monarch-jupyter/dashboard/nb/nothere/": (404, "expected <folder>/.monarch/<context>/"),
        "/monarch-jupyter/dashboard/../etc/.monarch/x/": (404, ""),
    }
    for path, (want, words) in cases.items():
        code, headers, body = fetch(f"{base}{path}")
        assert code == want, (path, code, body[:300])
        message = json.loads(body)["error"]
        assert words in message and "\n" not in message, (path, message)
    code, headers, body = fetch(f"{base}{_context(root, 'nojob', None)}", accept="text/html")
    assert code == 404 and headers["Content-Type"].startswith("text/html")
    assert b"Monarch dashboard: context &#x27;nojob&#x27; has no job status" in body


def test_a_dashboard_that_never_answers_cannot_hang_the_server(server, root):
    base, _ = server
    apply_id = f"mute{secrets.token_hex(6)}"
    # accepts connections (the backlog) and never answers; this process plays the job's sidecar
    with socket.socket() as mute, held_sidecar_lock(apply_id):
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)
        path = _context(
            root, "mute", {"telemetry": f"http://127.0.0.1:{mute.getsockname()[1]}"}, apply_id=apply_id
        )
        started = time.monotonic()
        code, _, body = fetch(f"{base}{path}")
        assert code == 504, body[:300]
        assert time.monotonic() - started < TIMEOUT + 20
        assert "did not answer in time" in json.loads(body)["error"]
        code, _, _ = fetch(f"{base}{PREFIX}/api/summary")  # the others still answer
        assert code == 200


def test_nothing_listens_beyond_loopback(server, tkernel):
    _, proc = server
    pids = [*tagged_pids(tkernel.tag), proc.pid]
    everything = [(pid, addr, port) for pid in pids for addr, port in _procfs.listening_tcp(pid)]
    assert [s for s in everything if s[1] not in LOOPBACK] == [], everything
    assert any(pid == proc.pid for pid, _, _ in everything)  # the check can see the server's socket


class _Big(http.server.BaseHTTPRequestHandler):
    """A loopback server answering more than the proxy's bound (and a small page at /small)."""

    def do_GET(self) -> None:
        size = 100 if self.path == "/small" else MAX_RESPONSE_BYTES + (1 << 20)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        with contextlib.suppress(OSError):
            for _ in range(0, size, 1 << 20):
                self.wfile.write(b"x" * min(1 << 20, size))

    def log_message(self, *args) -> None:
        pass


def test_an_oversized_answer_is_cut_with_one_line(server, root):
    base, _ = server
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Big)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    stack = contextlib.ExitStack()
    apply_id = f"big{secrets.token_hex(6)}"
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        # #42: a server of ours that is not the job's sidecar is never relayed
        code, _, body = fetch(f"{base}{_context(root, 'plain', {'telemetry': url})}small")
        assert code == 403 and "not the job's sidecar" in json.loads(body)["error"], body[:300]
        stack.enter_context(held_sidecar_lock(apply_id))  # this process plays the job's sidecar
        path = _context(root, "big", {"telemetry": url}, apply_id=apply_id)
        code, _, body = fetch(f"{base}{path}small")
        assert code == 200 and body == b"x" * 100
        code, _, body = fetch(f"{base}{path}huge")
        assert code == 502, (code, body[:300])
        message = json.loads(body)["error"]
        assert "\n" not in message and "127.0.0.1" in message and "over 32 MB" in message, message
    finally:
        stack.close()
        httpd.shutdown()
        httpd.server_close()


def test_a_port_another_user_holds_is_not_proxied(server, root, second_user):
    """The sidecar stopped and another user took its port: what answers there is not served."""
    base, _ = server
    port = free_port()
    listen = f"import socket,time;s=socket.socket();s.bind(('127.0.0.1',{port}));s.listen(1);time.sleep(120)"
    proc = subprocess.Popen(second_user.command(sys.executable, "-c", listen))
    try:
        assert poll(lambda: _procfs.listen_owners(port) == {second_user.uid}, 20), "the other user's listener"
        code, _, body = fetch(f"{base}{_context(root, 'taken', {'telemetry': f'http://127.0.0.1:{port}'})}")
        assert code == 403, body[:300]
        assert "held by another user" in json.loads(body)["error"]
    finally:
        proc.kill()
        proc.wait()


def test_a_status_another_user_wrote_is_not_proxied_nor_listed_as_running(server, root, tkernel, second_user):
    """#42: a 0777 folder another user writes into: their status.json names our real sidecar's
    port (the job's apply id and all); the proxy refuses it and the sidebar does not list it running."""
    base, _ = server
    ours = json.loads((root / "nb" / ".monarch" / "default" / "status.json").read_text())
    shared = root / "shared"
    shared.mkdir(mode=0o777, exist_ok=True)
    shared.chmod(0o777)
    forged = shared / ".monarch" / "forged"
    forged.mkdir(parents=True, exist_ok=True)
    (forged / "status.json").write_text(json.dumps(ours))
    for path in (forged.parent, forged, forged / "status.json"):  # theirs, as if they made them
        path.chmod(0o666 if path.is_file() else 0o777)
        os.chown(path, second_user.uid, second_user.gid)
    code, _, body = fetch(f"{base}/monarch-jupyter/dashboard/shared/.monarch/forged/")
    assert code == 403 and "belongs to uid" in json.loads(body)["error"], body[:300]
    code, _, body = fetch(f"{base}/monarch-jupyter/contexts?path=shared")
    listed = {c["name"]: c for c in json.loads(body)["contexts"]}
    assert listed["forged"]["state"] == "unknown" and "belongs to uid" in listed["forged"]["refused"], listed
