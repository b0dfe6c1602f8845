"""The installed package ships its JupyterLab and server extensions enabled."""

import subprocess
import sys

import pytest

# each `jupyter … list` boots the Jupyter application and loads every installed extension (~3 s)
pytestmark = pytest.mark.daemon


def jupyter(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_labextension_is_prebuilt_and_enabled():
    lines = [line for line in jupyter("labextension", "list").splitlines() if "monarch_jupyter" in line]
    assert lines, "monarch_jupyter is not among the installed labextensions"
    assert "enabled" in lines[0] and "OK" in lines[0], lines[0]


def test_server_extension_is_enabled():
    lines = [
        line
        for line in jupyter("server", "extension", "list").splitlines()
        if "monarch_jupyter._server" in line
    ]
    assert lines and "enabled" in lines[0], lines


def test_version_is_written_once():
    """labextension/package.json holds the version; the wheel, the module and the
    built labextension all report it, and no other source file repeats it."""
    import json
    import re
    from importlib.metadata import version
    from pathlib import Path

    import monarch_jupyter

    root = Path(__file__).resolve().parents[2]
    declared = json.loads((root / "labextension/package.json").read_text())["version"]
    assert version("monarch_jupyter") == declared
    assert monarch_jupyter.__version__ == declared
    built = root / "monarch_jupyter/labextension/package.json"
    if built.exists():
        assert json.loads(built.read_text())["version"] == declared
    pyproject = (root / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert not re.search(r"(?m)^version\s*=", pyproject), "pyproject.toml must not repeat the version"
    init = (root / "monarch_jupyter/__init__.py").read_text()
    assert declared not in init, "monarch_jupyter/__init__.py must not repeat the version"
