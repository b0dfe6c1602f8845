"""``%%remote --torch``: the flag and the targets it refuses (one line each)."""

from __future__ import annotations

import pytest

from monarch_jupyter.remote.view.args import parse_cell, parse_line
from monarch_jupyter.text.parser import ArgumentsError


def test_the_flag():
    assert parse_cell("python --torch --per-host gpus=2", "x").torch
    assert parse_line("--torch --mesh trainers torchrun_like.sh").torch
    assert not parse_cell("", "x").torch


@pytest.mark.parametrize("flag", ["--point hosts=0", "--rank 1", "--all"])
def test_a_subset_of_the_mesh_is_refused(flag):
    with pytest.raises(ArgumentsError) as error:
        parse_cell(f"--torch {flag}", "x")
    text = str(error.value)
    assert "\n" not in text and f"--torch and {flag.split()[0]} exclude each other" in text
