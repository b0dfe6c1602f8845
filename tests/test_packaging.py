"""The installed package ships its JupyterLab and server extensions enabled."""

import subprocess
import sys


def jupyter(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_labextension_is_prebuilt_and_enabled():
    lines = [l for l in jupyter("labextension", "list").splitlines() if "monarch_jupyter" in l]
    assert lines, "monarch_jupyter is not among the installed labextensions"
    assert "enabled" in lines[0] and "OK" in lines[0], lines[0]


def test_server_extension_is_enabled():
    lines = [l for l in jupyter("server", "extension", "list").splitlines() if "monarch_jupyter._server" in l]
    assert lines and "enabled" in lines[0], lines
