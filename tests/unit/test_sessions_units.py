"""The pure parts of ``--session``: its flags, the folded values and errors, the book, the
``%autoremote`` transformer, ``%remote pull``'s verbatim expression and sizes."""

from __future__ import annotations

import json

import pytest

from monarch_jupyter.remote.cell import verbs  # noqa: F401  (the verbs register their parsers)
from monarch_jupyter.remote.cell.autoremote import AutoRemote, toggle
from monarch_jupyter.remote.cell.verbs.sessions import _bytes
from monarch_jupyter.remote.errors import SessionError
from monarch_jupyter.remote.run.sessions import (
    Book,
    SessionShape,
    rows_text,
    scatter_items,
)
from monarch_jupyter.remote.view.args import parse_cell, parse_line
from monarch_jupyter.remote.view.session_text import failure_text, group_errors, size_line, values_text
from monarch_jupyter.text.parser import ArgumentsError

P = lambda **k: tuple(k.items())  # noqa: E731


def test_session_flag_parses_with_or_without_a_name():
    assert parse_cell("python --session", "x = 1").session == "main"
    assert parse_cell("--session python", "x = 1").session == "main"  # `python` is the mode, not a name
    named = parse_cell("--session train --per-host gpus=2", "x")
    assert (named.session, named.mode, named.per_host, named.cell_line) == (
        "train",
        "python",
        (("gpus", 2),),
        2,
    )
    assert parse_cell("python --session t --cell-line 1", "x").cell_line == 1


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("bash --session", "--session keeps Python namespaces"),
        ("python --session --detach", "--session and --detach exclude each other"),
        ("python --session --output-dir out", "--session and --output-dir exclude each other"),
        ("python --session 9bad", "bad session name '9bad'"),
    ],
)
def test_bad_session_lines_are_one_line(line, says):
    with pytest.raises(ArgumentsError, match=says):
        parse_cell(line, "x")


def test_pull_takes_the_rest_of_the_line_as_typed():
    line = parse_line("pull --rank 1,2 --session s x['a b'] + 1")
    assert line.verb == "pull" and line.options["expr"] == "x['a b'] + 1"
    assert line.options["ranks"] == (1, 2) and line.options["session"] == "s"
    assert parse_line("pull -- -x").options["expr"] == "-x"
    with pytest.raises(ArgumentsError, match="goes after the flags"):
        parse_line("pull --rank 1")


def test_sizes():
    assert (_bytes("64MB"), _bytes("1GiB"), _bytes("1000"), _bytes("1.5k")) == (
        64_000_000,
        1 << 30,
        1000,
        1500,
    )
    with pytest.raises(Exception, match="wants a size"):
        _bytes("lots")
    assert "3.0 MB pickled is over the 1 MB limit" in size_line("w", 3_000_000, 1_000_000)


def test_values_fold_by_rank_set():
    ranks = [(P(hosts=h, gpus=g), "tensor([1.])") for h in range(2) for g in range(2)]
    assert values_text(ranks) == "hosts=0,gpus=[0-1]; hosts=1,gpus=[0-1] (4): tensor([1.])\n"
    mixed = [(P(hosts=0), "1"), (P(hosts=1), "2"), (P(hosts=2), "1"), (P(hosts=3), None)]
    assert values_text(mixed) == "hosts=[0,2] (2): 1\nhosts=1 (1): 2\n"
    assert values_text([(P(hosts=0), "a\nb")]) == "hosts=0 (1):\na\nb\n"
    assert values_text([(P(hosts=0), None)]) == ""


def test_errors_are_grouped_once_each():
    errors = {
        P(hosts=0): "NameError: x",
        P(hosts=1): "NameError: x",
        P(hosts=2): "KeyError: 'k' (cell line 3)",
    }
    assert (
        group_errors(errors) == "NameError: x on hosts=[0-1] (2); KeyError: 'k' (cell line 3) on hosts=2 (1)"
    )
    line = failure_text(
        "main", [(P(hosts=1), None, "timed_out"), (P(hosts=2), "E (cell line 2)", "failed")], 4
    )
    assert (
        line
        == "%%remote --session main: 2 of 4 ranks failed: timed out on hosts=1 (1); E (cell line 2) on hosts=2 (1)"
    )


def test_the_book_keeps_shapes_per_job(tmp_path):
    book = Book(tmp_path / "ctx" / "sessions.json")
    assert book.read() == (None, {})
    shape = SessionShape("main", "hosts", (("gpus", 2),), True, 12.5, "mesh hosts (4 ranks)")
    book.write("job-a", {"main": shape})
    assert book.shapes("job-a") == {"main": shape}
    assert book.shapes("job-b") == {}  # another job's sessions are not this one's
    (tmp_path / "ctx" / "sessions.json").write_text("{not json")
    assert book.read() == (None, {})  # a corrupt book is no sessions, never a traceback
    (tmp_path / "ctx" / "sessions.json").write_text(json.dumps({"job": "j", "sessions": {"x": {}}}))
    assert book.read() == (None, {})


def test_ls_rows_show_live_busy_and_cells():
    shape = SessionShape("main", None, None, False, 0.0, "mesh hosts (2 ranks)")
    rows = [
        {"name": "main", "alive": True, "busy": True, "cells": 3},
        {"name": "main", "alive": False, "busy": None, "cells": None},
        {"name": "other", "alive": True, "busy": False, "cells": 1},
    ]
    text = rows_text(rows, {"main": shape})
    lines = text.splitlines()
    assert lines[1].split() == ["main", "1", "of", "2", "1", "3", "mesh", "hosts", "(2", "ranks)"], text
    assert lines[2].split()[:5] == ["other", "1", "of", "1", "0"] and "not in this kernel's book" in lines[2]
    assert "no session" in rows_text([], {})


def test_scatter_wants_one_item_per_rank():
    assert scatter_items("v", [1, 2, 3], 3) == [1, 2, 3]
    with pytest.raises(SessionError, match="2 items for 3 ranks"):
        scatter_items("v", [1, 2], 3)
    with pytest.raises(SessionError, match="has no length"):
        scatter_items("v", 5, 3)


class _Shell:
    def __init__(self):
        self.input_transformers_cleanup = []


def test_autoremote_prefixes_cells_but_not_magics():
    shell = _Shell()
    assert "autoremote on" in toggle(shell, "on train")
    (transformer,) = shell.input_transformers_cleanup
    assert isinstance(transformer, AutoRemote)
    assert transformer(["x = 1\n"]) == ["%%remote python --session train --cell-line 1\n", "x = 1\n"]
    assert transformer(["\n", "  %job status\n"]) == ["\n", "  %job status\n"]
    assert transformer(["!ls\n"]) == ["!ls\n"] and transformer([]) == []
    assert toggle(shell, "") == "autoremote is on: cells run in session train"
    toggle(shell, "on")  # again: one transformer, the new session's
    assert [t.name for t in shell.input_transformers_cleanup] == ["main"]
    assert "off" in toggle(shell, "off") and shell.input_transformers_cleanup == []
    for bad in ("maybe", "off now", "on a b", "on 9x"):
        with pytest.raises(ArgumentsError):
            toggle(shell, bad)
