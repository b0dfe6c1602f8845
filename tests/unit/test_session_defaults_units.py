"""Issue 44's session ergonomics, pure: which session a verb without ``--session`` means, the
errors naming the sessions there are, ``%load_ext``'s note, sizes in B/KB/MB, the pandas hint
and the first tensor pull's note."""

from __future__ import annotations

import pickle
import sys
from types import SimpleNamespace

import pytest

from monarch_jupyter.remote.cell import verbs  # noqa: F401  (the verbs register their parsers)
from monarch_jupyter.remote.cell.verbs.sessions import sessions_note
from monarch_jupyter.remote.errors import SessionError
from monarch_jupyter.remote.run.sessions import Book, SessionShape, default_name, missing_text, needs_torch
from monarch_jupyter.remote.view.args import parse_line
from monarch_jupyter.remote.view.results import PANDAS_HINT, RankValues
from monarch_jupyter.remote.view.session_text import size_line, size_text


def test_the_default_session_is_the_last_used_else_the_only_one():
    assert default_name(None, ["ddp"]) == "ddp"
    assert default_name("b", ["a", "b"]) == "b"
    assert default_name("gone", ["ddp"]) == "ddp"  # stopped since: the only one left
    with pytest.raises(SessionError, match=r"^this job has sessions a, b: --session NAME says which$"):
        default_name(None, ["a", "b"])
    with pytest.raises(
        SessionError, match=r"no session in this context's job: %%remote python --session NAME"
    ):
        default_name(None, [])


def test_a_missing_session_names_those_there_are():
    line = missing_text("main", ["ddp"])
    assert line == (
        "no session 'main' in this context's job; its sessions: ddp (--session ddp), "
        "or %%remote python --session main starts a new one"
    )
    assert "(none yet): %%remote python --session x starts it" in missing_text("x", [])
    assert missing_text("x", list("abcdef")).count("--session") == 5  # four named, then the new one


def test_pull_and_push_parse_without_a_session():
    assert parse_line("pull x").options["session"] is None
    assert parse_line("push x").options["session"] is None
    assert parse_line("session start ddp --restart").options["restart"] is True


def test_load_ext_note_says_no_attach_is_needed(tmp_path):
    folder = tmp_path / ".monarch"
    session = SimpleNamespace(layout=SimpleNamespace(dir=folder), context="default")
    assert sessions_note(session) is None
    shape = SessionShape("ddp", None, (("gpus", 2),), True, 1.0)
    Book(folder / "default" / "sessions.json").write("job-1", {"ddp": shape})
    note = sessions_note(session)
    assert note is not None and "%%remote python --session ddp runs in them, no attach needed" in note


def test_sizes_are_bytes_kilobytes_or_megabytes():
    assert [size_text(n) for n in (0, 21, 999, 1000, 4200, 999_999, 3_000_000, 2.5e9)] == [
        "0 B",
        "21 B",
        "999 B",
        "1.0 KB",
        "4.2 KB",
        "1000.0 KB",
        "3.0 MB",
        "2.5 GB",
    ]
    assert size_text(len(pickle.dumps(0.5))) == "21 B"  # a float is not "0.0 MB"
    assert "3.0 MB pickled is over the 64 MB limit" in size_line("w", 3_000_000, 64_000_000)


def test_to_pandas_without_pandas_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    values = RankValues([("hosts=0", 1)], "x", [{"hosts": 0}])
    with pytest.raises(ImportError) as raised:
        values.to_pandas()
    assert str(raised.value) == PANDAS_HINT and "monarch_jupyter[pandas]" in PANDAS_HINT


def test_a_pull_says_when_unpickling_imports_torch(monkeypatch):
    tensor_like = b"\x80\x04\x95ctorch._utils\n_rebuild_tensor_v2\n"
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert needs_torch(tensor_like) and not needs_torch(pickle.dumps([1.0])) and not needs_torch(None)
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace())
    assert not needs_torch(tensor_like)  # imported already: nothing to wait for
