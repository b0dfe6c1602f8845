"""The settings page's tables (docs/reference/settings.md) list every MONARCH_JUPYTER_* variable the package's code names and
every configurable trait of the server extension."""

from __future__ import annotations

import re
from pathlib import Path

from monarch_jupyter._server.config import MonarchJupyter

REPO = Path(__file__).resolve().parents[2]
NAME = re.compile(r"MONARCH_JUPYTER_[A-Z0-9_]*[A-Z0-9]")


def _section(title: str) -> str:
    text = (REPO / "docs" / "reference" / "settings.md").read_text()
    assert text.startswith(f"# {title}\n")
    return text


def test_every_variable_the_code_names_is_in_the_table():
    code = {
        name
        for path in (REPO / "monarch_jupyter").rglob("*.py")
        for name in NAME.findall(path.read_text(encoding="utf-8"))
    }
    assert len(code) >= 7, code
    rows = set(re.findall(r"^\| `(MONARCH_JUPYTER_[A-Z0-9_]+)` \|", _section("Settings"), re.M))
    assert code - rows == set(), f"add these to docs/reference/settings.md: {sorted(code - rows)}"
    assert rows - code == set(), (
        f"docs/reference/settings.md lists variables the code no longer names: {sorted(rows - code)}"
    )


def test_every_server_setting_is_in_the_table():
    traits = set(MonarchJupyter.class_own_traits(config=True))
    rows = set(re.findall(r"^\| `c\.MonarchJupyter\.(\w+)` \| ([^|]+) \|", _section("Settings"), re.M))
    assert {name for name, _ in rows} == traits
    defaults = MonarchJupyter()
    for name, default in rows:
        assert float(default) == float(getattr(defaults, name)), name
