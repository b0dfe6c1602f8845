"""scripts/run_notebook.py prints remote text with its colours but without terminal controls:
a rank printing OSC 0 / OSC 52 / OSC 8 or a screen clear cannot act on the user's terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from harness import TAG_VAR

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "run_notebook.py"

pytestmark = pytest.mark.kernel

HOSTILE = (
    r"\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J"
    r"\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\ \x1b[31mred\x1b[0m"
)


def test_remote_escapes_are_stripped_but_colours_kept(tmp_path: Path, tag: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext monarch_jupyter"),
        nbformat.v4.new_code_cell("%job apply --local hosts=1"),
        nbformat.v4.new_code_cell(f"%%remote\nprintf '{HOSTILE}\\n'"),
        nbformat.v4.new_code_cell("%job kill"),
    ]
    path = tmp_path / "escapes.ipynb"
    nbformat.write(nb, path)
    # stdout on a pseudo-terminal, as a user runs it: the script keeps colours only for a tty
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(path)],
        cwd=tmp_path,
        env={**os.environ, TAG_VAR: tag},
        stdout=slave,
        stderr=subprocess.PIPE,
    )
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the script exited and closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    rc = proc.wait(timeout=30)
    out = b"".join(chunks).decode(errors="replace")
    assert rc == 0, out[-2000:] + proc.stderr.read().decode(errors="replace")[-2000:]
    printed = "\n".join(line for line in out.splitlines() if "printf" not in line)  # not the source
    line = next(line for line in printed.splitlines() if "link" in line and "red" in line)
    assert "\x1b[31mred\x1b[0m" in line, repr(line)
    assert "\x1b]" not in printed and "\x1b[2J" not in printed and "pwned" not in printed, repr(line)
