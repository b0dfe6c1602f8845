"""``%job context use NAME`` through the magic over a real folder (no kernel, no Monarch job):
a new name is created, as the CLI does, and said so a typo shows."""

from __future__ import annotations

import os

import pytest
from IPython.core.error import UsageError

from monarch_jupyter.jobs.facade import JobContext
from monarch_jupyter.jobs.formatting import created_context_line
from monarch_jupyter.jobs.magic import JobMagics
from monarch_jupyter.runtime import chatter as _quiet


class InlineLoop:
    def call(self, fn, *args, timeout=None):
        return fn(*args)


@pytest.fixture
def magics(tmp_path, monkeypatch):
    monkeypatch.setattr(_quiet, "start_client_context", lambda: None)
    return JobMagics(None, JobContext(loop=InlineLoop(), cwd=lambda: str(tmp_path)))


def test_a_new_name_is_created_and_said(magics, tmp_path, capsys):
    magics.job("context create quickstart")
    magics.job("context use default")
    capsys.readouterr()
    magics.job("context use nope")
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "created context 'nope' (no job yet; contexts: default, quickstart)",
        "switched to context 'nope'",
        "monarch_jupyter: no job in context 'nope' yet; %job apply --local hosts=2 starts one",
    ]
    assert os.readlink(tmp_path / ".monarch/job_state.pkl") == "nope/state.pkl"  # still switched, as the CLI
    assert (tmp_path / ".monarch/nope").is_dir()


def test_an_existing_name_only_switches(magics, capsys):
    magics.job("context create exp")
    capsys.readouterr()
    magics.job("context use exp")
    out = capsys.readouterr().out
    assert "created context" not in out
    assert out.startswith("switched to context 'exp'\nmonarch_jupyter: no job in context 'exp' yet")


def test_a_bad_name_is_one_usage_line(magics, tmp_path):
    with pytest.raises(UsageError, match="invalid context name"):
        magics.job("context use ../x")
    assert not (tmp_path / ".monarch").exists()


def test_the_created_line_without_other_contexts():
    assert created_context_line("default", []) == "created context 'default' (no job yet; no other context)"
