"""Each time format of the kernel side, the exact strings shown and saved (pure, no I/O)."""

from __future__ import annotations

import re
import time

import pytest

from monarch_jupyter.text import timefmt as _timefmt

TS = 1796130202.123456  # 2026-12-01 13:03:22.123456 UTC


@pytest.fixture
def berlin(monkeypatch):
    """Local time one hour ahead of UTC in December, whatever the machine's zone."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_local_time_is_what_status_and_attach_lines_show(berlin):
    assert _timefmt.local_time(TS) == "2026-12-01 14:03:22"
    assert _timefmt.local_time(TS) == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(TS))
    assert _timefmt.local_time(None) == _timefmt.local_time(0) == "-"


def test_utc_iso_is_what_status_json_saves(berlin):
    assert _timefmt.utc_iso(TS) == "2026-12-01T13:03:22Z"


def test_utc_stamp_names_batch_runs_and_apply_logs(berlin):
    assert _timefmt.utc_stamp(TS) == "20261201-130322"
    assert _timefmt.utc_stamp(TS, micro=True) == "20261201-130322-123456"
    assert re.fullmatch(r"\d{8}-\d{6}", _timefmt.utc_stamp())
    assert re.fullmatch(r"\d{8}-\d{6}-\d{6}", _timefmt.utc_stamp(micro=True))


def test_local_stamp_names_quarantined_caches(berlin):
    assert _timefmt.local_stamp(TS) == "20261201T140322"
    # the bounds read the precise clock, as datetime.now() does: time.strftime() alone reads
    # time(NULL), the kernel's coarse clock, which can still be in the second before
    before = time.strftime("%Y%m%dT%H%M%S", time.localtime(time.time()))
    assert before <= _timefmt.local_stamp() <= time.strftime("%Y%m%dT%H%M%S", time.localtime(time.time()))


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-5, "0 s"),
        (0, "0 s"),
        (42.9, "42 s"),
        (60, "1 min"),
        (3599, "59 min"),
        (3600, "1 h"),
        (86400 * 2.5, "2 d"),
    ],
)
def test_age_truncates_to_the_largest_whole_unit(seconds, shown):
    assert _timefmt.age(seconds) == shown
