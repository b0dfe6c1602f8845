"""The text of ranks that wait on a failed one and of ranks kept blocked at a stop (pure)."""

from __future__ import annotations

from monarch_jupyter.remote.view.session_text import (
    blocked_error,
    blocked_hint,
    failure_text,
    hang_line,
)

P = lambda **k: tuple(k.items())  # noqa: E731


def test_the_hang_line_names_who_waits_where_and_the_way_out():
    line = hang_line(
        "hosts=0,gpus=[0-1]", "hosts=1,gpus=0", 2.2, {"hosts=0,gpus=[0-1]": "all_reduce (gloo)"}, "ddp"
    )
    assert line.startswith(
        "hosts=0,gpus=[0-1] still running 2 s after hosts=1,gpus=0 failed, waiting in all_reduce (gloo)"
    )
    assert "likely waiting for the failed rank" in line
    assert line.endswith("%remote session unblock ddp frees them and keeps every variable")


def test_the_hang_line_without_a_known_place_claims_no_cause():
    line = hang_line("hosts=0", "hosts=1", 3.0, {"hosts=0": ""}, "ddp")
    assert "likely" not in line and "waiting in" not in line
    assert (
        hang_line("hosts=0", "hosts=1", 3.0, {}, None)
        == "hosts=0 still running 3 s after hosts=1 failed: Ctrl-C stops them"
    )


def test_places_that_differ_are_each_named():
    line = hang_line("a; b", "c", 2.0, {"a": "all_reduce (gloo)", "b": "barrier (gloo)"}, "s")
    assert "(a in all_reduce (gloo); b in barrier (gloo))" in line


def test_a_blocked_rank_adds_the_way_out_once():
    error = blocked_error("all_reduce (gloo) at cell line 5")
    assert error == "blocked in all_reduce (gloo) at cell line 5; its namespace is kept"
    text = failure_text(
        "ddp", [(P(hosts=0), error, "interrupted"), (P(hosts=1), "ValueError: x", "failed")], 2
    )
    assert text.count("%remote session unblock ddp") == 1, text
    assert blocked_hint("ddp", ["ValueError: x", None]) == ""


def test_different_collectives_are_a_mismatch_one_collective_is_not():
    from monarch_jupyter.remote.view.session_text import mismatch_line

    line = mismatch_line({"hosts=0": "all_reduce (gloo)", "hosts=1": "broadcast (gloo)"}, "mm")
    assert line.startswith("collective mismatch: hosts=0 in all_reduce (gloo); hosts=1 in broadcast (gloo).")
    assert "--check-collectives" in line and "%remote session unblock mm" in line
    assert mismatch_line({"hosts=[0-1]": "all_reduce (gloo)"}, "mm") == ""
    assert (
        mismatch_line({"hosts=0": "all_reduce (gloo)", "hosts=1": "sleep"}, "mm") == ""
    )  # not both collectives
