import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from monarch_jupyter.contexts import Layout, check_name
from monarch_jupyter.errors import MonarchJupyterError

MONARCH_CLI = str(Path(sys.executable).with_name("monarch"))


def cli(folder: Path, *args: str) -> str:
    done = subprocess.run(
        [MONARCH_CLI, *args], cwd=folder, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_fresh_folder_defaults(tmp_path):
    layout = Layout(tmp_path)
    assert layout.current() == "default"
    assert layout.names() == []
    assert layout.infos() == []


def test_use_create_remove(tmp_path):
    layout = Layout(tmp_path)
    assert layout.create("exp1") is True
    assert layout.create("exp1") is False
    layout.use("exp2")
    assert os.readlink(layout.link) == "exp2/state.pkl"
    assert layout.current() == "exp2"
    assert layout.names() == ["default", "exp1", "exp2"]
    layout.remove("exp2")
    assert layout.current() == "default"
    assert "exp2" not in layout.names()


def test_legacy_plain_file_is_migrated(tmp_path):
    (tmp_path / ".monarch").mkdir()
    (tmp_path / ".monarch" / "job_state.pkl").write_bytes(b"old")
    layout = Layout(tmp_path)
    assert layout.legacy_state() is not None
    layout.ensure()
    assert (tmp_path / ".monarch" / "default" / "state.pkl").read_bytes() == b"old"
    assert os.readlink(layout.link) == "default/state.pkl"


def test_spec_and_status_files(tmp_path):
    layout = Layout(tmp_path)
    layout.create("default")
    layout.write_spec("default", "mod.job")
    assert layout.read_spec("default") == "mod.job"
    layout.write_spec("default", None)
    assert layout.read_spec("default") is None
    layout.write_status("default", {"state": "running"})
    assert json.loads((tmp_path / ".monarch/default/status.json").read_text()) == {"state": "running"}
    (tmp_path / ".monarch/default/status.json").write_text("{broken")
    assert layout.read_status("default") is None


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../x", ".hidden", "a b"])
def test_bad_names(name):
    with pytest.raises(MonarchJupyterError):
        check_name(name)


def test_layout_matches_the_monarch_cli(tmp_path):
    """Contexts made by either side are seen by the other."""
    cli(tmp_path, "context", "create", "from_cli")
    cli(tmp_path, "context", "use", "from_cli")
    layout = Layout(tmp_path)
    assert layout.current() == "from_cli"
    layout.use("from_nb")
    listing = cli(tmp_path, "context", "ls")
    assert "* from_nb" in listing
    assert "from_cli" in listing
    cli(tmp_path, "context", "rm", "from_nb")
    assert layout.current() == "default"
