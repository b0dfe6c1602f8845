"""The server extension's settings through Jupyter's config system (a real ``jupyter server``
reading ``jupyter_server_config.py``): scan depth, bounds and the sidebar's poll interval."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from browser_util import SERVER, jupyter_server
from monarch_jupyter._server.config import MonarchJupyter
from monarch_jupyter._server.contexts import LIMITS, Limits, list_contexts

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


def test_settings_from_jupyter_config(tree, tmp_path):
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "jupyter_server_config.py").write_text(
        "c.MonarchJupyter.scan_depth = 2\nc.MonarchJupyter.poll_interval = 7.5\n"
    )
    with jupyter_server(tree, home, ui=SERVER, token=TOKEN) as server:
        body = server.api("monarch-jupyter/contexts")
    assert isinstance(body, dict), body
    assert body["poll_seconds"] == 7.5
    assert "a/deep/.monarch/default" in dirs(body), body
