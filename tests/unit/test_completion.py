"""completion.complete: the line up to the cursor and plain facts → the candidates; and the
facts read from a real folder."""

from __future__ import annotations

import pytest
from IPython.core.completer import provisionalcompleter
from IPython.testing.globalipapp import start_ipython

from monarch_jupyter.extension import completion
from monarch_jupyter.extension.completion import Facts, complete, folder_facts, top_level_names
from monarch_jupyter.jobs.facade import JobContext
from monarch_jupyter.remote.cell import verbs  # noqa: F401 - fills remote_args.VERBS
from monarch_jupyter.remote.view import args as remote_args

FACTS = Facts(
    contexts=("default", "quickstart"),
    meshes=("trainers", "workers"),
    runs=("20261201-101010-aaaa", "20261201-090909-bbbb"),
    modules=("jobs", "train"),
    attrs=lambda module: {"jobs": ("big", "small")}.get(module, ()),
    remote_verbs=remote_args.VERBS,
    cell_parser=remote_args.PARSERS[remote_args.CELL],
    line_parser=remote_args.PARSERS[remote_args.LINE],
)


def candidates(before: str, first_line: bool = True) -> list[str]:
    found = complete(before, FACTS, first_line)
    assert before.endswith(found.fragment)
    return found.candidates


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        (
            "%job ",
            [
                "status",
                "apply",
                "kill",
                "batch",
                "logs",
                "query",
                "profile",
                "topology",
                "reconnect",
                "refresh",
                "trust",
                "debug",
                "context",
            ],
        ),
        ("%job rec", ["reconnect"]),
        ("%job re", ["reconnect", "refresh"]),
        ("%job context ", ["ls", "use", "create", "rm"]),
        ("%job context use ", ["default", "quickstart"]),
        ("%job context use q", ["quickstart"]),
        ("%job context rm d", ["default"]),
        ("%job context create ", []),  # a new name: nothing to offer
        ("%job kill ", ["default", "quickstart"]),
        ("%job apply ", ["jobs.", "train."]),
        ("%job apply jobs.", ["jobs.big", "jobs.small"]),
        ("%job apply jobs.s", ["jobs.small"]),
        ("%job apply --", ["--local", "--ssh"]),
        ("%job apply --local hosts=2 --", ["--telemetry", "--admin", "--mount", "--gather"]),
        ("%job apply --ssh w=a,b --p", ["--python", "--port"]),
        ("%job logs 1 -", ["--follow"]),
        ("%job debug o", ["on", "off"]),
        ("  %job st", ["status"]),
    ],
)
def test_job(before, expected):
    assert candidates(before) == expected


def test_cell_flags_and_values():
    flags = candidates("%%remote --")
    assert {"--mesh", "--all", "--per-host", "--point", "--save", "--timeout", "--env"} <= set(flags)
    assert "--help" not in flags
    assert candidates("%%remote --me") == ["--mesh"]
    assert "--mesh" not in candidates("%%remote --mesh trainers --")  # given once
    assert candidates("%%remote --mesh ") == ["trainers", "workers"]
    assert candidates("%%remote --mesh w") == ["workers"]
    assert candidates("%%remote ") == ["bash", "python"]
    assert candidates("%%remote --quiet py") == ["python"]
    assert candidates("%%remote python ") == []
    assert candidates("%%remote --", first_line=False) == []  # flags go on the first line only


def test_dims():
    assert candidates("%%remote --point ") == ["hosts="]
    assert candidates("%%remote --per-host gpus=2 --point ") == ["hosts=", "gpus="]
    assert candidates("%%remote --per-host gpus=2 --point hosts=1,") == ["hosts=1,gpus="]
    assert candidates("%%remote --per-host ") == ["gpus="]


def test_line_verbs_runs_and_flags():
    assert set(candidates("%remote ")) == set(remote_args.VERBS)
    assert candidates("%remote att") == ["attach"]
    assert candidates("%remote attach ") == ["20261201-101010-aaaa", "20261201-090909-bbbb"]
    assert candidates("%remote stop 20261201-101010-aaaa 2026") == ["20261201-090909-bbbb"]
    assert candidates("%remote stop --") == ["--all"]
    assert candidates("%remote stacks --point ") == ["hosts="]
    assert "--mesh" in candidates("%remote --")
    assert candidates("%remote --mesh ") == ["trainers", "workers"]
    assert candidates("%remote --quiet echo --") == []  # the command has begun
    assert candidates("%remote echo ") == []


def test_not_ours():
    assert candidates("%jo") == []
    assert candidates("x = 1") == []
    assert candidates("%time %job ") == []


def test_folder_facts(tmp_path):
    (tmp_path / "jobs.py").write_text(
        "import os\nbig = 1\ndef small(): ...\nclass Mine: ...\n_hidden = 2\nx: int = 3\n"
    )
    (tmp_path / "broken.py").write_text("def (:\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("spec = None\n")
    (tmp_path / "not a module.py").write_text("")
    (tmp_path / "huge.py").write_text("a = 1\n" * (completion.MODULE_BYTES // 6 + 10))
    session = JobContext(cwd=lambda: str(tmp_path))
    session.layout.create("other")
    facts = folder_facts(session)
    assert facts.modules == ["broken", "huge", "jobs", "pkg"]
    assert facts.attrs("jobs") == ["Mine", "big", "small", "x"]
    assert facts.attrs("pkg") == ["spec"]
    assert facts.attrs("broken") == facts.attrs("huge") == facts.attrs("nope") == facts.attrs("../x") == []
    assert facts.contexts == ["other"]
    assert top_level_names(tmp_path, "os") == []  # only the folder's own modules


def test_through_ipython_completer(tmp_path):
    """The matcher installed in a real InteractiveShell answers IPython's completer."""
    (tmp_path / "jobs.py").write_text("big = 1\n")
    ip = start_ipython()
    completion.install(ip, JobContext(cwd=lambda: str(tmp_path)))
    completion.install(ip, JobContext(cwd=lambda: str(tmp_path)))  # once only
    assert sum(m.__module__ == completion.__name__ for m in ip.Completer.custom_matchers) == 1
    with provisionalcompleter():
        for text, expected in (("%job context u", "use"), ("%job apply jobs.b", "jobs.big")):
            found = list(ip.Completer.completions(text, len(text)))
            assert [c.text for c in found] == [expected]
            assert text[: found[0].start] + found[0].text in (
                f"%job context {expected}",
                f"%job apply {expected}",
            )
