"""Show the tables ``%job query`` returns as their bounded view (row count, elapsed time).

The magic's value is the pyarrow.Table itself; IPython's formatters for pyarrow.Table are
given a function that knows the tables we returned (by weak reference) and leaves every
other table to its own repr. Takes the shell as an argument: no IPython import here.
"""

from __future__ import annotations

import weakref
from typing import Any

from .table_view import QueryResult

_known: dict[int, tuple[weakref.ref[Any], str, float]] = {}
_installed: set[int] = set()


def remember(result: QueryResult) -> None:
    """Show ``result.table`` with its caption wherever it is displayed, while it lives."""
    key = id(result.table)
    _known[key] = (weakref.ref(result.table, lambda _: _known.pop(key, None)), result.sql, result.elapsed)


def _view(obj: Any) -> QueryResult | None:
    entry = _known.get(id(obj))
    if entry is None or entry[0]() is not obj:
        return None
    return QueryResult(obj, entry[1], entry[2])


def install(shell: Any) -> None:
    """Register the formatters on ``shell`` once (text/html and text/plain for pyarrow.Table)."""
    if shell is None or id(shell) in _installed:
        return
    import pyarrow

    formatters = shell.display_formatter.formatters

    def as_html(obj: Any) -> str | None:
        view = _view(obj)
        return view.html() if view is not None else None

    def as_text(obj: Any, printer: Any, cycle: bool) -> None:
        view = _view(obj)
        printer.text(view.text() if view is not None else repr(obj))

    formatters["text/html"].for_type(pyarrow.Table, as_html)
    formatters["text/plain"].for_type(pyarrow.Table, as_text)
    _installed.add(id(shell))
