"""The cell's streamed lines beside a run grid (remote.magic._CellStreams)."""

from __future__ import annotations

from monarch_jupyter.remote.magic import _CellStreams


def test_lines_stream_until_a_view_draws_them_and_are_kept_for_a_replay() -> None:
    written: list[tuple[str, str]] = []
    place: list[tuple[str, bool] | None] = [None]
    streams = _CellStreams(written.extend, lambda: place[0])
    streams([("out", "a\n")])
    place[0] = ("monarch-run-x", False)  # the grid is displayed, no view drew it yet
    streams([("err", "b\n")])
    streams([])
    assert written == [("out", "a\n"), ("err", "b\n")]
    written.clear()
    streams.replay()  # after clear_output: everything again, in order
    assert written == [("out", "a\n"), ("err", "b\n")] and streams.kept
    place[0] = ("monarch-run-x", True)  # a view said it draws the lines
    written.clear()
    streams([("out", "c\n")])
    assert written == []


def test_too_much_to_keep_is_not_kept() -> None:
    written: list[tuple[str, str]] = []
    streams = _CellStreams(written.extend, lambda: None, limit=10)
    streams([("out", "12345\n")])
    assert streams.kept
    streams([("out", "67890\n")])
    assert not streams.kept and len(written) == 2
    written.clear()
    streams.replay()
    assert written == []
