"""The monarch_jupyter server extension, against a real ``jupyter server`` subprocess."""

from __future__ import annotations

import json
import os
import pickle
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from browser_util import SERVER, jupyter_server

TOKEN = secrets.token_hex(16)
STARTUP_SECONDS = 60


class _TouchMarker:
    """Unpickling this runs ``touch <path>``: proof that nothing unpickles state.pkl."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _write_context(monarch: Path, name: str, status: dict | None, marker: Path) -> None:
    ctx = monarch / name
    ctx.mkdir(parents=True)
    (ctx / "state.pkl").write_bytes(pickle.dumps(_TouchMarker(marker)))
    if status is not None:
        (ctx / "status.json").write_text(json.dumps(status))


def _status(name: str, state: str) -> dict:
    return {
        "context": name,
        "job_class": "ProcessJob",
        "apply_id": f"apply-{name}",
        "spec": "monarch_jupyter.local_jobs.hosts_2",
        "state": state,
        "meshes": [{"name": "hosts", "hosts": 2, "live_workers": 2}],
        "urls": {"telemetry": None, "dashboard": None, "admin": None},
        "updated": "2026-11-30T15:00:00Z",
    }


def _run_entry(run_id: str, state: str, started: float, **more) -> dict:
    """A runs index entry as remote/run/index.py reads it (as its first writers wrote it)."""
    return {
        "version": 1,
        "id": run_id,
        "command": "python train.py --epochs 3\nprint('done')",
        "mode": "bash",
        "target": "mesh hosts (2 ranks)",
        "started": started,
        "host_dir": f"/nonexistent/{run_id}",
        "local": False,
        "detached": True,
        "ranks": [{"label": "hosts=0", "mesh": "hosts", "point": {"hosts": 0}, "rank": 0}],
        "state": state,
        **more,
    }


def _write_runs(runs: Path, host_runs: Path) -> None:
    """Two running runs, a finished one, one the index says runs but whose ranks all wrote
    their exit status on this host, and files that must be skipped without blocking."""
    runs.mkdir(parents=True)
    entries = [
        _run_entry(
            "20261201-010000-aaaaaa",
            "running",
            1764550800.0,
            local=True,
            host_dir=str(host_runs / "20261201-010000-aaaaaa"),
        ),
        _run_entry("20261201-020000-bbbbbb", "running", 1764554400.0),
        _run_entry("20261201-005000-cccccc", "finished", 1764550200.0),
        _run_entry(
            "20261201-004000-dddddd",
            "running",
            1764549600.0,
            local=True,
            host_dir=str(host_runs / "20261201-004000-dddddd"),
        ),
    ]
    for entry in entries:
        (runs / f"{entry['id']}.json").write_text(json.dumps(entry))
    ended = host_runs / "20261201-004000-dddddd" / "hosts.0"
    ended.mkdir(parents=True)
    (ended / "status").write_text("0 1764549700.0")
    going = host_runs / "20261201-010000-aaaaaa" / "hosts.0"  # made ahead: an empty status
    going.mkdir(parents=True)
    (going / "status").write_text("")
    (runs / "20261201-010000-aaaaaa.log").write_text("log")
    os.mkfifo(runs / "20261201-030000-fifo00.json")  # would block a plain open()
    os.symlink(runs / "20261201-010000-aaaaaa.json", runs / "20261201-030000-link00.json")
    (runs / "20261201-030000-huge00.json").write_text(
        json.dumps(_run_entry("20261201-030000-huge00", "running", 1764558000.0, pad="x" * (1 << 20)))
    )
    (runs / "20261201-030000-wrong0.json").write_text(json.dumps(_run_entry("other", "running", 1.0)))
    (runs / "20261201-030000-junk00.json").write_text("{not json")
    (runs / "state.pkl.json").write_bytes(pickle.dumps({"not": "json"}))


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A server root with two contexts at the top (one active) and one in a subfolder."""
    root = tmp_path_factory.mktemp("root")
    marker = root.parent / "UNPICKLED"
    monarch = root / ".monarch"
    _write_context(monarch, "default", _status("default", "running"), marker)
    _write_context(monarch, "bare", None, marker)
    (monarch / "runs").mkdir()  # not a context: no state.pkl, spec or status.json
    (monarch / "runs" / "xyz.log").write_text("log")
    (monarch / "fresh").mkdir()  # a context that so far has only its spec
    (monarch / "fresh" / "spec").write_text("monarch_jupyter.local_jobs.hosts_2")
    os.symlink("default/state.pkl", monarch / "job_state.pkl")
    _write_context(root / "proj" / ".monarch", "sub", _status("sub", "workers dead"), marker)
    _write_runs(monarch / "default" / "runs", root.parent / "host-runs")
    # A status.json symlinked to a file outside the root must not be followed.
    secret = root.parent / "secret.json"
    secret.write_text(json.dumps({"state": "running", "secret": True}))
    _write_context(monarch, "linked", None, marker)
    os.symlink(secret, monarch / "linked" / "status.json")
    return root


@pytest.fixture(scope="module")
def server(tree, tmp_path_factory):
    """Base URL of a ``jupyter server`` on ``tree``; always reaped."""
    home = tmp_path_factory.mktemp("jupyter-home")
    with jupyter_server(tree, home, ui=SERVER, token=TOKEN, timeout=STARTUP_SECONDS) as server:
        yield server.url


def _get(url: str, token: str | None = TOKEN) -> tuple[int, dict | str]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"token {token}")
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _by_dir(body: dict) -> dict[str, dict]:
    return {c["dir"]: c for c in body["contexts"]}


def test_requires_token(server):
    code, _ = _get(f"{server}/monarch-jupyter/contexts", token=None)
    assert code in (401, 403, 302)
    code, _ = _get(f"{server}/monarch-jupyter/contexts", token="wrong")
    assert code in (401, 403, 302)


def test_lists_contexts(server):
    code, body = _get(f"{server}/monarch-jupyter/contexts")
    assert code == 200
    assert body["root"] == ""
    contexts = _by_dir(body)
    assert sorted(contexts) == [
        ".monarch/bare",
        ".monarch/default",
        ".monarch/fresh",
        ".monarch/linked",
        "proj/.monarch/sub",
    ]
    default = contexts[".monarch/default"]
    assert default["name"] == "default"
    assert default["state"] == "running"
    assert default["status"] == _status("default", "running")
    assert contexts["proj/.monarch/sub"]["state"] == "workers dead"


def test_active_marking_follows_symlink(server):
    _, body = _get(f"{server}/monarch-jupyter/contexts")
    assert [c["dir"] for c in body["contexts"] if c["active"]] == [".monarch/default"]


def test_context_without_status_is_unknown(server):
    _, body = _get(f"{server}/monarch-jupyter/contexts")
    contexts = _by_dir(body)
    assert contexts[".monarch/bare"]["state"] == "unknown"
    assert contexts[".monarch/bare"]["status"] is None
    assert contexts[".monarch/fresh"]["state"] == "unknown"
    # A symlinked status.json (here pointing outside the root) is not read.
    assert contexts[".monarch/linked"]["status"] is None


def test_subfolder_path(server):
    code, body = _get(f"{server}/monarch-jupyter/contexts?path=proj")
    assert code == 200
    assert body["root"] == "proj"
    assert [c["dir"] for c in body["contexts"]] == ["proj/.monarch/sub"]


@pytest.mark.parametrize("path", ["..", "../..", "proj/../..", "/etc", "missing"])
def test_rejects_path_traversal(server, path):
    code, _ = _get(f"{server}/monarch-jupyter/contexts?path={urllib.parse.quote(path)}")
    assert code == 400


def test_never_unpickles(server, tree):
    for _ in range(3):
        assert _get(f"{server}/monarch-jupyter/contexts")[0] == 200
    assert not (tree.parent / "UNPICKLED").exists()
    assert not (tree / "UNPICKLED").exists()


def test_lists_running_runs_from_the_index(server):
    """The running runs of each context, newest first, from runs/<id>.json: finished ones, runs
    whose ranks all ended on this host, FIFOs, symlinks, huge, foreign or corrupt files are
    left out, and none of them blocks the listing."""
    started = time.monotonic()
    code, body = _get(f"{server}/monarch-jupyter/contexts")
    assert code == 200 and time.monotonic() - started < 5
    contexts = _by_dir(body)
    runs = contexts[".monarch/default"]["runs"]
    assert [r["id"] for r in runs] == ["20261201-020000-bbbbbb", "20261201-010000-aaaaaa"]
    assert runs[0] == {
        "id": "20261201-020000-bbbbbb",
        "command": "python train.py --epochs 3",
        "target": "mesh hosts (2 ranks)",
        "started": 1764554400.0,
        "state": "running",
        "detached": True,
        "attach": "%remote attach 20261201-020000-bbbbbb",
    }
    assert contexts[".monarch/bare"]["runs"] == []
    assert contexts["proj/.monarch/sub"]["runs"] == []
