"""The text of ``--session`` cells (pure): errors and values folded across ranks, clush-style."""

from __future__ import annotations

from collections.abc import Sequence

from ...text.rank_sets import rank_set

Point = tuple[tuple[str, int], ...]


def group_errors(by_rank: dict[Point, str]) -> str:
    """``NameError: name 'x' is not defined on hosts=[0-3] (4)``: each error once, with its ranks."""
    groups: dict[str, list[Point]] = {}
    for point, error in by_rank.items():
        groups.setdefault(error, []).append(point)
    return "; ".join(
        f"{error} on {rank_set(points, brackets=True)} ({len(points)})" for error, points in groups.items()
    )


def values_text(ranks: Sequence[tuple[tuple[tuple[str, int], ...], str | None]]) -> str:
    """Each rank's shown last expression (``ranks``: each rank's point and value), folded where
    identical, clush-style: ``hosts=[0-3] (4): tensor([1.])``, one line per distinct value (a
    multi-line value starts on the next line). Empty when no rank had one."""
    groups: dict[str, list[tuple[tuple[str, int], ...]]] = {}
    for point, value in ranks:
        if value is not None:
            groups.setdefault(value, []).append(point)
    lines = []
    for value, points in groups.items():
        head = f"{rank_set(points, brackets=True)} ({len(points)})"
        lines.append(f"{head}:\n{value}" if "\n" in value else f"{head}: {value}")
    return "\n".join(lines) + ("\n" if lines else "")


def failure_text(name: str, ranks: list[tuple[Point, str | None, str]], total: int) -> str:
    """One line for a session cell that failed on some ranks: each error once, with its ranks
    (``ranks``: point, error, status of every failing rank)."""
    by_rank = {point: error or status.replace("_", " ") for point, error, status in ranks}
    return f"%%remote --session {name}: {len(ranks)} of {total} ranks failed: " + group_errors(by_rank)


def size_text(nbytes: float) -> str:
    """``812 B``, ``4.2 KB``, ``3.0 MB``, ``1.5 GB`` (decimal, as ``--max-bytes`` reads them)."""
    if nbytes < 1000:
        return f"{int(nbytes)} B"
    for unit, size in (("KB", 1e3), ("MB", 1e6)):
        if nbytes < size * 1000:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes / 1e9:.1f} GB"


def size_line(name: str, nbytes: int, limit: int) -> str:
    return (
        f"{name}: {size_text(nbytes)} pickled is over the {size_text(limit).replace('.0 ', ' ')} limit per rank: "
        "--max-bytes raises it (it goes in one message per rank), or save it to a file the ranks read"
    )
