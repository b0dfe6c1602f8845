"""#42: a ``.sessions`` link in the runs root is refused like a link at the runs root itself."""

from __future__ import annotations

import pytest

from monarch_jupyter.remote.host import session


def test_a_sessions_link_is_refused(tmp_path):
    root = tmp_path / "runs"
    root.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert session.session_dir("job1", "ns", "k", 0, root).parents[2] == root / ".sessions"
    (root / ".sessions").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(session.NamespaceError, match=r"not a folder of yours \(a link\?\)"):
        session.session_dir("job1", "ns", "k", 0, root)
    with pytest.raises(session.NamespaceError):
        session.records("job1", None, None, root)
    assert list(elsewhere.iterdir()) == []
