"""The kernel side's time formats, one function each (pure: no I/O, no state).

- :func:`local_time`: a moment for a person, in local time (``2026-12-01 14:03:22``).
- :func:`utc_iso`: a moment in saved data, in UTC (``2026-12-01T13:03:22Z``).
- :func:`utc_stamp`: a moment as the start of a sortable id or file name (``20261201-130322``,
  with ``micro``: ``20261201-130322-123456``).
- :func:`local_stamp`: a moment in a file name a person reads, in local time (``20261201T140322``).
- :func:`seconds`: a measured duration (``0.42 s``).
- :func:`span`: a duration a person reads at a glance (``12.5 s``, ``1.5 min``, ``2.0 h``).
- :func:`age`: how long ago, in whole units (``42 s``, ``5 min``, ``3 h``, ``2 d``).
"""

from __future__ import annotations

import datetime as _dt

NONE = "-"  # what local_time and span show for an unknown value


def local_time(ts: float | None) -> str:
    """``ts`` (epoch seconds) in local time; :data:`NONE` when unknown (None or 0)."""
    if not ts:
        return NONE
    return _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def utc_iso(ts: float) -> str:
    """``ts`` (epoch seconds) as ISO 8601 UTC to the second."""
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_stamp(ts: float | None = None, micro: bool = False) -> str:
    """``ts`` (epoch seconds; default: now) in UTC as ``YYYYmmdd-HHMMSS``, with ``-ffffff``
    (microseconds) when ``micro``: name order is age order."""
    moment = (
        _dt.datetime.now(_dt.timezone.utc) if ts is None else _dt.datetime.fromtimestamp(ts, _dt.timezone.utc)
    )
    return moment.strftime("%Y%m%d-%H%M%S-%f" if micro else "%Y%m%d-%H%M%S")


def local_stamp(ts: float | None = None) -> str:
    """``ts`` (epoch seconds; default: now) in local time as ``YYYYmmddTHHMMSS``."""
    moment = _dt.datetime.now() if ts is None else _dt.datetime.fromtimestamp(ts)
    return moment.strftime("%Y%m%dT%H%M%S")


def seconds(value: float) -> str:
    """A measured duration to the hundredth of a second."""
    return f"{value:.2f} s"


def span(value: float | None) -> str:
    """A duration in the largest unit that keeps it above one; :data:`NONE` when unknown."""
    if value is None:
        return NONE
    if value < 60:
        return f"{value:.1f} s"
    if value < 3600:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


def age(value: float) -> str:
    """How long ago, truncated to the largest whole unit (a negative value is ``0 s``)."""
    value = max(0.0, value)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if value >= size:
            return f"{int(value // size)} {unit}"
    return f"{int(value)} s"
