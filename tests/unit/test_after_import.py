"""runtime/after_import.py: a callback right after a module's first import, never failing it."""

from __future__ import annotations

import sys

from monarch_jupyter.runtime.after_import import when_imported


def _module(tmp_path, monkeypatch, name: str, body: str = "VALUE = 1\n") -> None:
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)


def test_the_callback_runs_once_after_the_modules_body(tmp_path, monkeypatch):
    _module(tmp_path, monkeypatch, "mj_after_one")
    seen = []
    when_imported("mj_after_one", lambda: seen.append(sys.modules["mj_after_one"].VALUE))
    assert seen == []
    import mj_after_one

    assert seen == [1]
    del sys.modules["mj_after_one"]
    import mj_after_one  # noqa: F401, F811 (a second import: the finder is gone)

    assert seen == [1]
    assert not any(type(f).__name__ == "_Finder" for f in sys.meta_path)


def test_an_already_imported_module_calls_back_at_once():
    seen = []
    when_imported("json", lambda: seen.append(True))
    assert seen == [True]


def test_a_failing_callback_never_fails_the_import(tmp_path, monkeypatch):
    _module(tmp_path, monkeypatch, "mj_after_two")

    def broken() -> None:
        raise RuntimeError("no")

    when_imported("mj_after_two", broken)
    import mj_after_two

    assert mj_after_two.VALUE == 1
