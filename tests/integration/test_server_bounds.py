"""The server extension under hostile trees: bounded responses and scans, against a real
``jupyter server`` subprocess (300 contexts with a 1 MB status.json each made every
poll return 300 MB; 100,000 folders cost 0.21 s of CPU per poll)."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_util import SERVER, jupyter_server
from monarch_jupyter._server import contexts

REPO = Path(__file__).resolve().parents[2]
TOKEN = secrets.token_hex(16)
CONTEXTS = 150
FOLDERS = 20_000


def _status(name: str, pad: int) -> dict:
    return {
        "context": name,
        "job_class": "ProcessJob",
        "apply_id": f"apply-{name}",
        "spec": "x" * pad,
        "state": "running",
        "meshes": [{"name": f"m{i}", "hosts": 2, "live_workers": 2, "junk": "y" * 100} for i in range(100)],
        "urls": {"telemetry": None},
        "updated": "2026-11-30T15:00:00Z",
        "extra": "z" * 1000,
    }


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CONTEXTS contexts with a ~60 KB status.json each, one with a 2 MB one, and FOLDERS
    empty folders beside them."""
    root = tmp_path_factory.mktemp("root")
    monarch = root / ".monarch"
    for i in range(CONTEXTS):
        ctx = monarch / f"c{i:04d}"
        ctx.mkdir(parents=True)
        (ctx / "status.json").write_text(json.dumps(_status(ctx.name, 40_000)))
    (monarch / "a-huge").mkdir()
    (monarch / "a-huge" / "status.json").write_text(json.dumps(_status("a-huge", 2 << 20)))
    many = root / "many"
    for i in range(FOLDERS):
        (many / f"f{i:05d}").mkdir(parents=True)
    (many / "zzzz" / ".monarch" / "late").mkdir(parents=True)  # past the scan bound
    (many / "zzzz" / ".monarch" / "late" / "spec").write_text("s")
    return root


@pytest.fixture(scope="module")
def server(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("jupyter-home")
    with jupyter_server(tree, home, ui=SERVER, token=TOKEN) as server:
        yield server.url


def _get(url: str) -> tuple[bytes, float]:
    request = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}"})
    start = time.monotonic()
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
    return body, time.monotonic() - start


def test_many_big_statuses_give_a_bounded_summary(server: str) -> None:
    raw, seconds = _get(f"{server}/monarch-jupyter/contexts")
    body = json.loads(raw)
    print(
        f"\n{CONTEXTS + 1} contexts with ~60 KB status.json: {len(raw) / 1e3:.0f} KB in {seconds * 1e3:.0f} ms"
    )
    assert len(raw) <= contexts.MAX_RESPONSE_BYTES
    assert len(body["contexts"]) == contexts.MAX_CONTEXTS
    assert body["truncated"] is True
    huge = body["contexts"][0]
    assert huge["name"] == "a-huge" and huge["status"] is None and huge["state"] == "unknown"
    status = body["contexts"][1]["status"]
    assert set(status) <= {
        "context",
        "job_class",
        "apply_id",
        "spec",
        "state",
        "updated",
        "applied",
        "meshes",
        "urls",
    }
    assert len(status["spec"]) == contexts.STATUS_CHARS
    assert len(status["meshes"]) == contexts.STATUS_ITEMS
    assert status["meshes"][0] == {"name": "m0", "hosts": 2, "live_workers": 2}


def test_a_huge_folder_is_scanned_to_a_bound(server: str) -> None:
    raw, seconds = _get(f"{server}/monarch-jupyter/contexts?path=many")
    body = json.loads(raw)
    print(f"\n{FOLDERS} folders: {len(raw)} bytes in {seconds * 1e3:.0f} ms")
    assert body["truncated"] is True
    assert body["contexts"] == []  # 'zzzz' is past the first MAX_SUBFOLDERS


def test_the_server_answers_other_requests_while_tabs_poll(server: str) -> None:
    """Polls are scanned and serialised off the event loop: /api/status stays quick."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys, urllib.request as u\n"
                "r = u.Request(sys.argv[1], headers={'Authorization': 'token ' + sys.argv[2]})\n"
                "for _ in range(5): u.urlopen(r, timeout=60).read()",
                f"{server}/monarch-jupyter/contexts",
                TOKEN,
            ]
        )
        for _ in range(5)
    ]
    try:
        times = [_get(f"{server}/api/status")[1] for _ in range(10)]
    finally:
        for proc in procs:
            assert proc.wait(timeout=120) == 0
    print(f"\n/api/status while 5 tabs poll: max {max(times) * 1e3:.0f} ms")


def test_the_run_grid_code_is_served_for_the_saved_loader(server: str) -> None:
    """The loader each saved grid carries (widgets/run_stub.js) imports these two files."""
    widgets = REPO / "monarch_jupyter" / "widgets"
    for name, kind in (("run.js", "text/javascript"), ("run.css", "text/css")):
        request = urllib.request.Request(
            f"{server}/monarch-jupyter/static/{name}?v=1", headers={"Authorization": f"token {TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Content-Type"] == kind
            assert response.read() == (widgets / name).read_bytes()
    for name in ("run.py", "job.js", "..%2Frun.py"):
        request = urllib.request.Request(
            f"{server}/monarch-jupyter/static/{name}", headers={"Authorization": f"token {TOKEN}"}
        )
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(request, timeout=10)
        assert error.value.code == 404, name
    with pytest.raises(urllib.error.HTTPError) as error:  # no token: refused (or sent to log in)
        urllib.request.build_opener(_NoRedirect).open(f"{server}/monarch-jupyter/static/run.js", timeout=10)
    assert error.value.code in (302, 401, 403)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None
