"""The server extension's settings through Jupyter's config system (a real ``jupyter server``
reading ``jupyter_server_config.py``): scan depth, bounds and the sidebar's poll interval."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from monarch_jupyter._server.config import MonarchJupyter
from monarch_jupyter._server.contexts import LIMITS, Limits, list_contexts

REPO = Path(__file__).resolve().parents[2]
TOKEN = secrets.token_hex(16)


def _context(folder: Path) -> None:
    ctx = folder / ".monarch" / "default"
    ctx.mkdir(parents=True)
    (ctx / "spec").write_text("monarch_jupyter.local_jobs.hosts_2")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for folder in (root, root / "a", root / "a" / "deep", root / "b"):
        folder.mkdir(parents=True, exist_ok=True)
        _context(folder)
    return root


def dirs(body: dict) -> list[str]:
    return [c["dir"] for c in body["contexts"]]


def test_limits_in_the_listing(tree):
    assert dirs(list_contexts(str(tree))) == [".monarch/default", "a/.monarch/default", "b/.monarch/default"]
    assert Limits() == LIMITS and MonarchJupyter().limits() == LIMITS  # the defaults are the constants
    assert dirs(list_contexts(str(tree), limits=Limits(depth=0))) == [".monarch/default"]
    assert "a/deep/.monarch/default" in dirs(list_contexts(str(tree), limits=Limits(depth=2)))
    assert dirs(list_contexts(str(tree), limits=Limits(subfolders=1))) == [
        ".monarch/default",
        "a/.monarch/default",
    ]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_settings_from_jupyter_config(tree, tmp_path):
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "jupyter_server_config.py").write_text(
        "c.MonarchJupyter.scan_depth = 2\nc.MonarchJupyter.poll_interval = 7.5\n"
    )
    port = _free_port()
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    cmd = [
        *(sys.executable, "-m", "jupyter_server", "--no-browser", "--ServerApp.allow_root=True"),
        *("--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0"),
        *(f"--ServerApp.root_dir={tree}", f"--IdentityProvider.token={TOKEN}"),
        '--ServerApp.jpserver_extensions={"monarch_jupyter._server": True}',
    ]
    with open(home / "server.log", "wb") as log:
        proc = subprocess.Popen(
            cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        body = _poll(f"http://127.0.0.1:{port}/monarch-jupyter/contexts", proc, home / "server.log")
        assert body["poll_seconds"] == 7.5
        assert "a/deep/.monarch/default" in dirs(body), body
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _poll(url: str, proc: subprocess.Popen, log: Path) -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}"})
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            pytest.fail(f"jupyter server exited:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter server did not answer:\n{log.read_text()}")
            time.sleep(0.2)
