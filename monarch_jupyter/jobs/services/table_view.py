"""A query's result as a bounded table: HTML for notebooks, text for terminals (pure).

Works on any object with pyarrow.Table's ``num_rows``, ``column_names`` and ``slice`` /
``to_pylist``; only the first :data:`MAX_ROWS` rows and :data:`MAX_CELL` characters of a
cell are shown.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

MAX_ROWS = 50
MAX_CELL = 80


def first_line(text: str, limit: int = 300) -> str:
    """The first non-empty line of ``text``, cut to ``limit`` characters."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def cell(value: object) -> str:
    """One value as shown: ``NULL`` for None, cut to :data:`MAX_CELL` characters, one line."""
    text = "NULL" if value is None else str(value).replace("\n", "\\n")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


@dataclass
class QueryResult:
    """A query's table, its SQL and how long it took (seconds)."""

    table: Any
    sql: str
    elapsed: float

    def caption(self) -> str:
        rows = self.table.num_rows
        shown = f", first {MAX_ROWS} shown" if rows > MAX_ROWS else ""
        return f"{rows} row{'s' if rows != 1 else ''}{shown} · {self.elapsed * 1000:.1f} ms"

    def _rows(self) -> list[list[str]]:
        head = self.table.slice(0, MAX_ROWS).to_pylist()
        return [[cell(row.get(name)) for name in self.table.column_names] for row in head]

    def text(self) -> str:
        names = list(self.table.column_names)
        rows = self._rows()
        widths = [max([len(name), *(len(row[i]) for row in rows)]) for i, name in enumerate(names)]
        lines = ["  ".join(name.ljust(w) for name, w in zip(names, widths, strict=True)).rstrip()]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in rows]
        lines.append(f"({self.caption()})")
        return "\n".join(lines)

    def html(self) -> str:
        esc = html.escape
        types = [str(field.type) for field in self.table.schema]
        head = "".join(
            f"<th title='{esc(t)}'>{esc(name)}</th>"
            for name, t in zip(self.table.column_names, types, strict=True)
        )
        body = "".join("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>" for row in self._rows())
        return (
            f"<div><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<small>{esc(self.caption())}</small></div>"
        )


def tables_text(rows: list[dict[str, Any]]) -> str:
    """``table: col type, col type`` lines from information_schema.columns rows."""
    tables: dict[str, list[str]] = {}
    for row in rows:
        tables.setdefault(str(row["table_name"]), []).append(f"{row['column_name']} {row['data_type']}")
    return "\n".join(f"{name}: {', '.join(columns)}" for name, columns in tables.items())
