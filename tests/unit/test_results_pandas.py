"""``--save NAME``'s results as a pandas DataFrame (skipped without pandas), and the one line
saying what to install when pandas is missing."""

from __future__ import annotations

import sys

import pytest

from monarch_jupyter.remote.view.results import RankResult, RemoteResults

RESULTS = RemoteResults(
    [
        RankResult("hosts=0,gpus=0", "hosts", {"hosts": 0, "gpus": 0}, 0, "ok", 0, "a\n", "", 0.5),
        RankResult("hosts=0,gpus=1", "hosts", {"hosts": 0, "gpus": 1}, 1, "failed", 3, "", "boom\n", 0.25),
        RankResult("hosts=1,gpus=0", "hosts", {"hosts": 1, "gpus": 0}, 2, "timed_out", None, "", "", None),
    ]
)


def test_to_pandas():
    pytest.importorskip("pandas", reason="pandas is not installed (pip install pandas runs this test)")
    frame = RESULTS.to_pandas()
    assert list(frame.index) == [r.label for r in RESULTS]
    assert list(frame.columns) == [
        "mesh", "rank", "status", "returncode", "stdout", "stderr", "duration", "point.hosts", "point.gpus",
    ]  # fmt: skip
    assert frame.loc["hosts=0,gpus=1", "stderr"] == "boom\n"
    assert frame["point.gpus"].tolist() == [0, 1, 0]
    assert frame[frame.status != "ok"].index.tolist() == ["hosts=0,gpus=1", "hosts=1,gpus=0"]
    assert RemoteResults([]).to_pandas().empty


def test_without_pandas_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(
        ImportError,
        match=r"^to_pandas\(\) needs pandas: pip install .monarch_jupyter\[pandas\]. \(or pip install pandas\)$",
    ):
        RESULTS.to_pandas()
