"""scripts/run_notebook.py (the README's main command) leaves nothing running, however it ends.

A notebook that applies a local job starts workers in sessions of their own: they outlive the
kernel by design (a job survives a kernel restart). A headless run that stops early (Ctrl-C,
SIGTERM, or its reader gone, as with ``| head``) must still not leave them behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from harness import TAG_VAR, tagged_pids, worker_pids

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "run_notebook.py"

# scripts/run_notebook.py starts the kernel (and the job's workers) itself
pytestmark = pytest.mark.kernel


def _notebook(folder: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext monarch_jupyter"),
        nbformat.v4.new_code_cell("%job apply --local hosts=2"),
        nbformat.v4.new_code_cell(
            "%%remote\necho started; for i in $(seq 300); do echo tick $i; sleep 0.2; done"
        ),
        nbformat.v4.new_code_cell("%job kill"),
    ]
    path = folder / "long.ipynb"
    nbformat.write(nb, path)
    return path


def _start(tag: str, notebook: Path) -> subprocess.Popen:
    env = {**os.environ, TAG_VAR: tag}
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(notebook)],
        cwd=notebook.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _read_until(proc: subprocess.Popen, text: bytes, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    seen = b""
    while text not in seen:
        assert time.monotonic() < deadline, f"never saw {text!r}; got {seen[-500:]!r}"
        line = proc.stdout.readline()
        assert line, f"the run ended before {text!r}: {seen[-500:]!r}"
        seen += line


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "output closed"])
def test_a_run_stopped_early_leaves_no_process(tmp_path, tag, how):
    notebook = _notebook(tmp_path)
    proc = _start(tag, notebook)
    try:
        _read_until(proc, b"[hosts=1] started")
        assert len(worker_pids(tag)) == 2  # the job is up, its command running
        if how == "ctrl-c":
            proc.send_signal(signal.SIGINT)
        elif how == "sigterm":
            proc.send_signal(signal.SIGTERM)
        else:
            proc.stdout.close()  # the reader went away (| head): the next line it prints fails
        rc = proc.wait(timeout=60)
        err = proc.stderr.read().decode()
        assert rc == 130, err
        assert "Traceback" not in err, err
        assert "stopped" in err and "before its last cell" in err, err
        deadline = time.monotonic() + 10
        while tagged_pids(tag) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert tagged_pids(tag) == []  # kernel, workers, their procs, the run: all gone
        # and the job's cache went with its workers, as %job kill's would: the next run starts clean
        assert "removed the cache of context default" in err, err
        assert not list(tmp_path.glob(".monarch/*/state.pkl"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_run_to_the_end_says_nothing_of_leftovers(tmp_path, tag):
    """The notebook kills its own job: nothing is left to stop, and none is claimed."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext monarch_jupyter"),
        nbformat.v4.new_code_cell("%job apply --local hosts=2"),
        nbformat.v4.new_code_cell("%remote echo hi"),
        nbformat.v4.new_code_cell("%job kill"),
    ]
    path = tmp_path / "short.ipynb"
    nbformat.write(nb, path)
    proc = _start(tag, path)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err.decode()
    assert b"[hosts=0] hi" in out and b"all cells ran" in out
    assert b"left running" not in err, err.decode()
    assert tagged_pids(tag) == []
