"""Per-rank results of a run kept in a notebook variable (``%%remote --save NAME``)."""

from __future__ import annotations

import html
import importlib
from dataclasses import asdict, dataclass
from typing import Any, SupportsIndex, overload

from ...text import timefmt as _timefmt
from .model import ERR, OK, OUT, SKIPPED, RunState

# pandas is an optional extra: the one line a to_pandas() without it raises
PANDAS_HINT = "to_pandas() needs pandas: pip install 'monarch_jupyter[pandas]' (or pip install pandas)"


@dataclass(frozen=True)
class RankResult:
    label: str
    mesh: str
    point: dict[str, int]
    rank: int
    status: str
    returncode: int | None
    stdout: str
    stderr: str
    duration: float | None


class RemoteResults(list[RankResult]):
    """Per-rank results of a run, in rank order; ``results["hosts=1"]`` by label too."""

    @overload
    def __getitem__(self, key: SupportsIndex | str) -> RankResult: ...
    @overload
    def __getitem__(self, key: slice) -> list[RankResult]: ...
    def __getitem__(self, key: SupportsIndex | str | slice) -> RankResult | list[RankResult]:
        if isinstance(key, str):
            for item in self:
                if item.label == key:
                    return item
            raise KeyError(key)
        return super().__getitem__(key)

    @property
    def returncodes(self) -> dict[str, int | None]:
        return {r.label: r.returncode for r in self}

    @property
    def ok(self) -> bool:
        return all(r.status == OK for r in self if r.status != SKIPPED)

    def to_pandas(self) -> Any:
        """A pandas DataFrame, one row per rank (the :class:`RankResult` fields, a column per
        point dim as ``point.<dim>``), indexed by label. Needs pandas (the ``pandas`` extra)."""
        try:
            pandas = importlib.import_module("pandas")  # optional: not a dependency
        except ImportError:
            raise ImportError(PANDAS_HINT) from None
        rows = []
        for r in self:
            row = asdict(r)
            row.update({f"point.{dim}": value for dim, value in row.pop("point").items()})
            rows.append(row)
        columns = [name for name in RankResult.__dataclass_fields__ if name != "point"]
        frame = pandas.DataFrame(rows, columns=list(dict.fromkeys([*columns, *(k for r in rows for k in r)])))
        return frame.set_index("label")

    def _rows(self) -> list[tuple[str, str, str, str, str]]:
        return [
            (
                r.label,
                r.status.replace("_", " "),
                "" if r.returncode is None else str(r.returncode),
                "" if r.duration is None else _timefmt.seconds(r.duration),
                (r.stdout.strip().splitlines() or [""])[-1][:80],
            )
            for r in self
        ]

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        head = ("rank", "status", "rc", "time", "last stdout line")
        rows = self._rows()
        widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
        text = "\n".join(
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in [head, *rows]
        )
        cells = "".join(
            "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
        )
        table = (
            "<table><thead><tr>"
            + "".join(f"<th>{h}</th>" for h in head)
            + "</tr></thead><tbody>"
            + cells
            + "</tbody></table>"
        )
        return {"text/plain": text, "text/html": table}

    @classmethod
    def from_state(cls, state: RunState) -> RemoteResults:
        return cls(
            RankResult(
                r.label,
                r.mesh,
                dict(r.point),
                r.rank,
                r.status,
                r.returncode,
                r.text(OUT),
                r.text(ERR),
                r.duration,
            )
            for r in state.ranks
        )


class RankValues(list[Any]):
    """``%remote pull EXPR``: each rank's value, in rank order; ``values["hosts=1"]`` by label
    too, ``.labels`` the ranks, ``to_dict()`` and ``to_pandas()`` (one row per rank)."""

    def __init__(
        self, pairs: list[tuple[str, Any]], expr: str = "", points: list[dict[str, int]] | None = None
    ) -> None:
        super().__init__(value for _, value in pairs)
        self.labels = [label for label, _ in pairs]
        self.points = points or [{} for _ in pairs]
        self.expr = expr

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            try:
                return super().__getitem__(self.labels.index(key))
            except ValueError:
                raise KeyError(key) from None
        return super().__getitem__(key)

    def to_dict(self) -> dict[str, Any]:
        return dict(zip(self.labels, self, strict=True))

    def to_pandas(self) -> Any:
        """A pandas DataFrame indexed by rank label, one ``value`` column. Needs pandas."""
        try:
            pandas = importlib.import_module("pandas")  # optional: not a dependency
        except ImportError:
            raise ImportError(PANDAS_HINT) from None
        return pandas.DataFrame({"value": list(self)}, index=pandas.Index(self.labels, name="label"))

    def __repr__(self) -> str:
        from .session_text import values_text

        shown = [
            (tuple(point.items()), _short(value)) for point, value in zip(self.points, self, strict=True)
        ]
        return values_text(shown).rstrip("\n") or "(no ranks)"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def _short(value: Any, most: int = 2000) -> str:
    try:
        text = repr(value)
    except Exception as error:
        text = f"<repr failed: {type(error).__name__}>"
    return text if len(text) <= most else text[:most] + "…"
