"""Tab completion of ``%job query``: table names (asked of the store once per telemetry URL) and
its flags. Completion never attaches a job and never waits long: no answer, no names."""

from __future__ import annotations

from typing import Any

FLAGS = ("--tables", "--pandas")
TIMEOUT = 2.0  # seconds: a completion that waits on the store longer offers no table names
_names: dict[str, list[str]] = {}


def candidates(line: str, names: list[str]) -> list[str]:
    """What may complete the last word of a ``%job query`` line (pure)."""
    words = line.lstrip().split()
    if len(words) < 2 or words[0] not in ("%job", "job") or words[1] != "query":
        return []
    partial = "" if line.endswith((" ", "\t")) or len(words) == 2 else words[-1]
    if len(words) == 2 and not line.endswith(" "):
        return []
    if partial.startswith("-"):
        return [flag for flag in FLAGS if flag.startswith(partial)]
    return [name for name in names if name.lower().startswith(partial.lower())]


def table_names(session: Any) -> list[str]:
    """The telemetry store's table names, cached per URL; [] unless a job is attached and answers."""
    if not getattr(session, "attached", False):
        return []
    from . import query  # urllib's HTTP stack: imported by the first completion that may ask

    try:
        job, state, _, _ = session.running()
        url = query.telemetry_url(job, state)
    except Exception:
        return []
    if url not in _names:
        try:
            rows = query.fetch(url, "SHOW TABLES", timeout=TIMEOUT).to_pylist()
        except Exception:
            return []
        _names[url] = sorted({str(row.get("table_name")) for row in rows if row.get("table_name")})
    return _names[url]


def register(ipython: Any, session: Any) -> None:
    """Complete ``%job query …`` lines in ``ipython``."""

    def complete(_shell: Any, event: Any) -> list[str]:
        line = getattr(event, "line", "")
        if "query" not in line:
            return []
        return candidates(line, table_names(session))

    ipython.set_hook("complete_command", complete, str_key="%job")
