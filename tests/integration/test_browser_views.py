"""Our views under load and for the keyboard, in a real JupyterLab in Debian's Chromium.

A saved notebook with a 100,000-rank ``%%remote`` result opens with a bounded
DOM (the renderer draws one page of ranks, failing first). Timings are printed
for benchmarks/README.md, never asserted; only bounds that cannot flake are.
The server serves this checkout's build (``browser_util.jupyter_path``):
``cd labextension && jlpm build:prod`` first.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_util import BUILT, CHROMIUM, CHROMIUM_ARGS, LAB, JupyterServer

pytestmark = [
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
    ),
    pytest.mark.skipif(
        not (BUILT / "package.json").is_file(), reason="no build: cd labextension && jlpm build:prod"
    ),
    pytest.mark.timeout(240),
    pytest.mark.browser,
]

RUN_MIME = "application/vnd.monarch.remote+json"
RANKS = 100_000
MAX_OUTPUT_NODES = 3000  # one page of 100 ranks is ~600 nodes; 100,000 drawn was ~700,000


def big_result(ranks: int = RANKS, failing_every: int = 1000) -> dict:
    """A version-2 payload of ``ranks`` ranks, one failing every ``failing_every``."""

    def rank(i: int) -> dict:
        failing = i % failing_every == failing_every - 1
        return {
            "label": f"hosts={i}",
            "mesh": "hosts",
            "point": {"hosts": i},
            "rank": i,
            "status": "failed" if failing else "ok",
            "returncode": 1 if failing else 0,
            "duration": 1e308 if i == 0 else 0.5,
            "lines": [["out", f"hello from {i} " + "x" * 100], ["err", "warning"]],
            "truncated": 0,
        }

    failed = ranks // failing_every
    return {
        "version": 2,
        "command": "echo hello",
        "mode": "bash",
        "target": f"hosts ({ranks} ranks)",
        "started": "2026-11-30T15:00:00Z",
        "duration": 1.5,
        "log_path": None,
        "summary": {"ok": ranks - failed, "failed": failed},
        "ranks": [rank(i) for i in range(ranks)],
        "run_id": "big",
        "state": "finished",
    }


def notebook(outputs: list[dict]) -> dict:
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
            "language_info": {"name": "python"},
        },
        "cells": [
            {
                "cell_type": "code",
                "execution_count": 1,
                "id": "c0",
                "metadata": {},
                "outputs": outputs,
                "source": "%%remote\necho hello",
            }
        ],
    }


@contextlib.contextmanager
def lab_page(tmp_path: Path, tag: str, files: dict[str, dict]) -> Iterator[tuple[JupyterServer, object]]:
    """A JupyterLab server over ``files`` (name -> notebook) and a Chromium page on it."""
    from playwright import sync_api

    root = tmp_path / "root"
    root.mkdir()
    for name, content in files.items():
        (root / name).write_text(json.dumps(content))
    server = JupyterServer(root, tmp_path / "jupyter", tag, LAB)
    try:
        server.wait_ready()
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.set_default_timeout(120_000)
                yield server, page
            finally:
                browser.close()
    except Exception:
        print(f"---- jupyter lab log ----\n{server.log()}")
        raise
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_huge_saved_result_renders_bounded(tmp_path: Path, tag: str) -> None:
    saved = {
        "output_type": "display_data",
        "metadata": {},
        "data": {RUN_MIME: big_result(), "text/plain": "remote: 99900 ok, 100 failed"},
    }
    name = "big.ipynb"
    with lab_page(tmp_path, tag, {name: notebook([saved])}) as (server, page):
        size = (server.root / name).stat().st_size
        start = time.monotonic()
        page.goto(f"{server.url}/lab/tree/{name}?token={server.token}")
        page.wait_for_selector(".jp-MonarchRun-rank")
        opened = time.monotonic() - start
        out = page.locator(".jp-MonarchRun").first
        nodes = out.evaluate("n => n.querySelectorAll('*').length")
        ranks = out.locator(".jp-MonarchRun-rank").count()
        first = out.locator(".jp-MonarchRun-rank").first.inner_text()
        more = out.locator(".jp-MonarchRun-more").inner_text()
        text = out.inner_text()
        start = time.monotonic()
        out.locator(".jp-MonarchRun-filter input").check()
        page.wait_for_function("() => document.querySelector('.jp-MonarchRun-more').hidden")
        failing = time.monotonic() - start
        failing_nodes = out.evaluate("n => n.querySelectorAll('*').length")
        print(
            f"\n100,000-rank payload ({size / 1e6:.1f} MB): open {opened:.1f} s to the first ranks, "
            f"{nodes} DOM nodes; 'failing only' {failing:.2f} s, {failing_nodes} nodes"
        )
    assert ranks == 100, ranks
    assert "hosts=999" in first and "rc=1" in first, first  # failing ranks come first
    assert "9,900 not shown" in more, more  # 10,000 ranks read; the rest are named, not drawn
    assert "90,000 more ranks not read" in text, text[-300:]
    assert nodes <= MAX_OUTPUT_NODES, nodes
    assert failing_nodes <= MAX_OUTPUT_NODES, failing_nodes
