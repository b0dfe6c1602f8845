"""The cell's streamed lines beside a run grid (remote.magic._CellStreams)."""

from __future__ import annotations

from monarch_jupyter.remote.cell.magic import _CellStreams


def test_lines_stream_until_a_view_draws_them() -> None:
    written: list[tuple[str, str]] = []
    place: list[tuple[str, bool] | None] = [None]
    streams = _CellStreams(written.extend, lambda: place[0])
    streams([("out", "a\n")])
    place[0] = ("monarch-run-x", False)  # the grid is displayed, no view drew it yet
    streams([("err", "b\n")])
    streams([])
    assert written == [("out", "a\n"), ("err", "b\n")]
    place[0] = ("monarch-run-x", True)  # a view said it draws the lines
    streams([("out", "c\n")])
    assert written == [("out", "a\n"), ("err", "b\n")]
