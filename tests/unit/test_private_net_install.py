"""#42: ``python -m monarch_jupyter.private_net install --prefix DIR`` installs under DIR."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from monarch_jupyter.system import private_net


def test_install_args():
    assert private_net.install_args([]) == (False, None)
    assert private_net.install_args(["--user"]) == (True, None)
    assert private_net.install_args(["--sys-prefix"]) == (False, sys.prefix)
    assert private_net.install_args(["--prefix", "/opt/x"]) == (False, "/opt/x")
    assert private_net.install_args(["--prefix=/opt/y"]) == (False, "/opt/y")
    for bad in (["--prefix"], ["--user", "--prefix", "/x"], ["--bogus"]):
        with pytest.raises(ValueError):
            private_net.install_args(bad)


def test_install_honours_the_prefix(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "monarch_jupyter.private_net", "install", "--prefix", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    spec = tmp_path / "share" / "jupyter" / "kernels" / private_net.KERNEL_NAME / "kernel.json"
    assert json.loads(spec.read_text())["argv"][1:3] == ["-m", "monarch_jupyter.private_net"]
    assert str(tmp_path) in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "monarch_jupyter.private_net", "install", "--prefix"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--prefix wants a folder" in bad.stderr
