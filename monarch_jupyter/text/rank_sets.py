"""Rank labels and rank sets in short form (pure): the one range formatter.

``label`` names one rank as ``%%remote`` does (``hosts=1,gpus=0``); ``rank_set`` names a set of
ranks with runs along the last dimension (``hosts=0,2-7``), or in clush's notation with
``brackets`` (``hosts=[0,2-7]``, a single value bare: ``hosts=7``).
"""

from __future__ import annotations

from collections.abc import Iterable


def label(point: Iterable[tuple[str, int]]) -> str:
    """``hosts=1,gpus=0``: the rank labels of ``%%remote``."""
    return ",".join(f"{k}={v}" for k, v in point)


def ranges(values: list[int]) -> str:
    """``[0, 2, 3, 4, 7]`` (sorted) → ``0,2-4,7``."""
    runs: list[list[int]] = []
    for v in values:
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def rank_set(points: Iterable[tuple[tuple[str, int], ...]], brackets: bool = False) -> str:
    """Ranks in short form: ``hosts=0,2-7``; with two dimensions ``hosts=0,gpus=0-3; hosts=1,gpus=1``
    (runs along the last dimension). ``brackets``: clush's ``hosts=[0,2-7]`` for more than one value."""
    rows: dict[tuple[tuple[str, int], ...], tuple[str, list[int]]] = {}
    for point in sorted(set(points), key=lambda p: tuple(v for _, v in p)):
        if not point:
            rows[()] = ("", [])
            continue
        *head, (last, value) = point
        rows.setdefault(tuple(head), (last, []))[1].append(value)
    parts = []
    for prefix, (last, values) in rows.items():
        text = ranges(values)
        if brackets and len(values) > 1:
            text = f"[{text}]"
        tail = f"{last}={text}" if values else "the only rank"
        parts.append(f"{label(prefix)},{tail}" if prefix else tail)
    return "; ".join(parts)
