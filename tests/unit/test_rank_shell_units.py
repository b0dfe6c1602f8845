"""``%remote shell`` and ``python -m monarch_jupyter.remote.rank_shell``: parsing, commands, checks."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from monarch_jupyter._server import shell as server_shell
from monarch_jupyter.remote import rank_shell
from monarch_jupyter.remote.cell import verbs
from monarch_jupyter.remote.rank_shell import ShellError, ShellTarget
from monarch_jupyter.text.parser import ArgumentsError


def test_parse_args_defaults_and_flags() -> None:
    assert rank_shell.parse_args([]) == ShellTarget(None, 0, None, False)
    assert rank_shell.parse_args(["--rank", "3", "--context", "exp", "--mesh", "trainers", "--hold"]) == (
        ShellTarget("exp", 3, "trainers", True)
    )


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--rank", "-1"], "--rank"),
        (["--rank", "x"], "wants a flat rank"),
        (["--context", "../x"], "context"),
        (["--nope"], "unrecognized"),
    ],
)
def test_parse_args_errors_are_one_line(argv: list[str], words: str) -> None:
    with pytest.raises(ArgumentsError) as info:
        rank_shell.parse_args(argv)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_main_says_bad_arguments_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert rank_shell.main(["--rank", "x"]) == rank_shell.USAGE_STATUS
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--rank" in err


def test_command_round_trips_through_the_parser() -> None:
    target = ShellTarget("exp", 2, "trainers")
    argv = rank_shell.command(target, python="/py")
    # -P: never the folder's own modules (#42: a planted monarch_jupyter/ would run as us)
    assert argv[:4] == ["/py", "-P", "-m", rank_shell.MODULE]
    assert rank_shell.parse_args(argv[4:]) == target
    assert rank_shell.command(ShellTarget(None, 0))[0] == sys.executable


def test_command_line_quotes_the_folder() -> None:
    line = rank_shell.command_line(ShellTarget("default", 1), "/tmp/my notebooks", python="/py")
    assert line.startswith("cd '/tmp/my notebooks' && /py -P -m monarch_jupyter.remote.rank_shell")
    words = shlex.split(line)
    assert words[:4] == ["cd", "/tmp/my notebooks", "&&", "/py"]


def test_points_are_row_major_and_env_matches_remote() -> None:
    sizes = {"hosts": 2, "gpus": 3}
    points = rank_shell.points(sizes)
    assert len(points) == 6 and points[0] == {"hosts": 0, "gpus": 0} and points[4] == {"hosts": 1, "gpus": 1}
    assert rank_shell.rank_env(points[4], sizes) == {
        "MONARCH_RANK_hosts": "1",
        "MONARCH_RANK_gpus": "1",
        "MONARCH_SIZE_hosts": "2",
        "MONARCH_SIZE_gpus": "3",
    }
    assert rank_shell.points({}) == [{}]


def test_pick_checks_mesh_and_rank() -> None:
    meshes = {"hosts": {"hosts": 2}, "trainers": {"hosts": 1}}
    assert rank_shell.pick(meshes, ShellTarget(None, 1)) == ("hosts", {"hosts": 1})
    assert rank_shell.pick(meshes, ShellTarget(None, 0, "trainers")) == ("trainers", {"hosts": 0})
    with pytest.raises(ShellError, match=r"rank 2 is out of range: mesh hosts has 2 ranks \(0–1\)"):
        rank_shell.pick(meshes, ShellTarget(None, 2))
    with pytest.raises(ShellError, match="no mesh 'x' in the job; it has: hosts, trainers"):
        rank_shell.pick(meshes, ShellTarget(None, 0, "x"))
    with pytest.raises(ShellError, match="no host meshes"):
        rank_shell.pick({}, ShellTarget(None, 0))


def test_bundle_has_the_payload_and_the_command_as_text() -> None:
    bundle = rank_shell.bundle(ShellTarget("default", 1), "/nb", {"hosts": 1}, python="/py", now=5.0)
    payload = bundle[rank_shell.MIME]
    assert payload["folder"] == "/nb" and payload["rank"] == 1 and payload["point"] == "hosts=1"
    assert payload["created"] == 5.0 and len(payload["id"]) == 32
    assert bundle["text/plain"] == (
        "a shell on rank 1 (hosts=1): run in a terminal\n"
        "  cd /nb && /py -P -m monarch_jupyter.remote.rank_shell --rank 1 --context default"
    )
    assert payload["command"] == bundle["text/plain"].split("\n")[1].strip()


# ── the verb, with a stand-in cell ────────────────────────────────────────
class _Mesh:
    def __init__(self, **sizes: int) -> None:
        self.sizes = sizes


class _Cell:
    def __init__(self, meshes: dict[str, Any]) -> None:
        job = SimpleNamespace()  # no engine claims it: its workers are not judged here
        self.session = SimpleNamespace(
            running=lambda: (job, None, "/nb", "default"), host_meshes=lambda: meshes
        )
        self.shown: list[dict[str, Any]] = []

    def display(self, bundle: dict[str, Any]) -> None:
        self.shown.append(bundle)


def test_verb_is_registered_and_displays_the_bundle() -> None:
    parsed = verbs.REGISTRY["shell"].parser.parse_args(["--rank", "1"])
    cell = _Cell({"hosts": _Mesh(hosts=2)})
    verbs.dispatch(cell, "shell", vars(parsed))  # type: ignore[arg-type]
    (bundle,) = cell.shown
    assert bundle[rank_shell.MIME]["rank"] == 1 and bundle[rank_shell.MIME]["context"] == "default"
    assert "--rank 1 --context default" in bundle["text/plain"]


def test_verb_refuses_a_rank_out_of_range() -> None:
    cell = _Cell({"hosts": _Mesh(hosts=2)})
    with pytest.raises(ShellError, match="rank 7 is out of range"):
        verbs.dispatch(cell, "shell", {"rank": 7, "mesh": None})  # type: ignore[arg-type]
    assert cell.shown == []


def test_stopped_and_dead_workers_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rank_shell._procfs, "alive", lambda pid: pid != 11)
    monkeypatch.setattr(rank_shell._procfs, "stopped", lambda pid: pid == 12)
    with pytest.raises(ShellError, match=r"worker hosts_1 \(pid 11\) is dead"):
        rank_shell._check_workers({"hosts_0": 10, "hosts_1": 11})
    with pytest.raises(
        ShellError, match=r"worker hosts_1 \(pid 12\) is stopped \(SIGSTOP\): `kill -CONT 12`"
    ):
        rank_shell._check_workers({"hosts_0": 10, "hosts_1": 12})
    rank_shell._check_workers({"hosts_0": 10})


# ── the server's route: what it accepts ───────────────────────────────────
def test_folder_of_stays_inside_the_root(tmp_path: Path) -> None:
    (tmp_path / "nb").mkdir()
    root = str(tmp_path)
    assert server_shell.folder_of(root, {"path": "nb"}) == str(tmp_path / "nb")
    assert server_shell.folder_of(root, {"folder": str(tmp_path / "nb")}) == str(tmp_path / "nb")
    assert server_shell.folder_of(root, {}) == str(tmp_path)
    for body in ({"folder": "/etc"}, {"folder": "nb"}, {"path": "../x"}, {"path": 3}, {"path": "nope"}):
        with pytest.raises(server_shell.InvalidPath):
            server_shell.folder_of(root, body)


@pytest.mark.parametrize(
    "body",
    [{"rank": -1}, {"rank": "1"}, {"rank": True}, {"rank": 0, "context": "a/b"}, {"rank": 0, "mesh": ""}],
)
def test_target_of_refuses_bad_bodies(body: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        server_shell.target_of(body)


def test_target_of_reads_a_good_body() -> None:
    assert server_shell.target_of({"rank": 1, "context": "exp", "mesh": "m"}) == ShellTarget("exp", 1, "m")


STATUS = {"state": "running", "meshes": [{"name": "hosts", "hosts": 2}], "stopped_workers": {}}


@pytest.mark.parametrize(
    ("status", "target", "words"),
    [
        (None, ShellTarget(None, 0), "no job in context 'default'"),
        ({**STATUS, "state": "workers dead"}, ShellTarget(None, 0), "is workers dead"),
        ({**STATUS, "stopped_workers": {"hosts_1": 9}}, ShellTarget(None, 0), "kill -CONT 9"),
        (STATUS, ShellTarget(None, 2), "rank 2 is out of range: mesh hosts has 2 ranks"),
        (STATUS, ShellTarget(None, 0, "x"), "no mesh 'x'"),
        (STATUS, ShellTarget(None, 1), None),
    ],
)
def test_refusal_from_the_status(
    status: dict[str, Any] | None, target: ShellTarget, words: str | None
) -> None:
    why = server_shell.refusal(status, target, "default")
    assert (why is None) if words is None else (why is not None and words in why)
