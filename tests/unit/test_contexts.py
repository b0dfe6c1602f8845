import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from monarch_jupyter.errors import MonarchJupyterError
from monarch_jupyter.jobs.contexts import Layout, check_name

MONARCH_CLI = str(Path(sys.executable).with_name("monarch"))


def cli(folder: Path, *args: str) -> str:
    done = subprocess.run([MONARCH_CLI, *args], cwd=folder, capture_output=True, text=True, timeout=120)
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


def test_a_very_long_name_is_one_line_not_enametoolong(tmp_path):
    with pytest.raises(MonarchJupyterError) as info:
        Layout(tmp_path).create("x" * 300)
    assert str(info.value) == (
        "invalid context name 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…': 300 characters; use at most 100"
    )
    assert not (tmp_path / ".monarch").exists()


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


# ── odd links, hostile files, the trusted spec ──────────────────
@pytest.mark.parametrize(
    "target", ["../state.pkl", "/etc/state.pkl", "default/sub/state.pkl", "default/other"]
)
def test_odd_active_link_is_named_with_its_fix(tmp_path, target):
    layout = Layout(tmp_path)
    layout.create("default")
    layout.link.symlink_to(target)
    with pytest.raises(MonarchJupyterError) as info:
        layout.current()
    message = str(info.value)
    assert ".monarch/job_state.pkl" in message and repr(target) in message
    assert "%job context use default" in message
    layout.use("default")  # the fix named works
    assert layout.current() == "default"


def test_fifo_status_of_another_context_does_not_block(tmp_path):
    import threading

    layout = Layout(tmp_path)
    layout.create("default")
    layout.create("other")
    os.mkfifo(layout.context_dir("other") / "status.json")
    os.mkfifo(layout.context_dir("other") / "spec")
    layout.write_status("default", {"state": "running"})
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("infos", layout.infos()), daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "listing contexts blocked on a FIFO"
    infos = {i.name: i for i in box["infos"]}
    assert infos["other"].status is None and infos["other"].spec is None
    assert infos["default"].status == {"state": "running"}


def test_trusted_spec_is_checked_like_the_pickle(tmp_path):
    layout = Layout(tmp_path)
    layout.create("default")
    layout.write_spec("default", "evil.job")
    spec = layout.context_dir("default") / "spec"
    spec.chmod(0o666)
    assert layout.read_spec("default") == "evil.job"  # shown in a listing
    with pytest.raises(MonarchJupyterError, match="spec is writable by group/others"):
        layout.read_spec("default", trusted=True)  # but not imported
    spec.chmod(0o644)
    (tmp_path / ".monarch").chmod(0o777)
    with pytest.raises(MonarchJupyterError, match=r"\.monarch is writable by group/others"):
        layout.read_spec("default", trusted=True)
    (tmp_path / ".monarch").chmod(0o755)
    assert layout.read_spec("default", trusted=True) == "evil.job"
    spec.unlink()
    os.mkfifo(spec)
    with pytest.raises(MonarchJupyterError, match="FIFO"):
        layout.read_spec("default", trusted=True)
