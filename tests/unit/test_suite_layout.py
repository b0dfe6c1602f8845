"""The suite collects as one tree: test modules are imported by basename (no packages), so two
files with one name in tests/unit and tests/integration stop the whole run at collection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


def test_test_module_names_are_unique():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [name for name, n in names.items() if n > 1] == []
