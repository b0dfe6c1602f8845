"""The fixtures of ``tests/fixtures/persisted/`` (artefacts the code before the re-lay wrote; see
its README.md), installed as a user's disk holds them, for the unit and integration tests."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from monarch_jupyter.jobs.contexts import Layout

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "persisted"
REPO = Path(__file__).resolve().parents[1]


def install_old_folder(root: Path, monkeypatch: pytest.MonkeyPatch, key: str | None = None) -> Layout:
    """The fixture ``.monarch/`` under ``root`` with the modes the old code gave it (git keeps
    none), and the fixture's signing key as this user's (``XDG_CONFIG_HOME`` in a temp folder)."""
    monarch = root / ".monarch"
    shutil.copytree(FIXTURES / "monarch", monarch, symlinks=True)
    for folder, _, files in os.walk(monarch):
        os.chmod(folder, 0o700)
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                os.chmod(path, 0o600)
    config = root.parent / "config"
    (config / "monarch_jupyter").mkdir(parents=True)
    for folder in (config, config / "monarch_jupyter"):
        os.chmod(folder, 0o700)
    key_file = config / "monarch_jupyter" / "cache.key"
    key_file.write_text(key if key is not None else (FIXTURES / "cache.key").read_text().strip())
    os.chmod(key_file, 0o600)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    return Layout(root)
