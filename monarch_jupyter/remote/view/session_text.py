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
    line = f"%%remote --session {name}: {len(ranks)} of {total} ranks failed: " + group_errors(by_rank)
    return line + blocked_hint(name, [error for _, error, _ in ranks])


def size_line(name: str, nbytes: int, limit: int) -> str:
    return (
        f"{name}: {nbytes / 1e6:.1f} MB pickled is over the {limit / 1e6:.0f} MB limit per rank: "
        "--max-bytes raises it (it goes in one message per rank), or save it to a file the ranks read"
    )


# ── ranks that wait on one that failed (a collective), and ranks kept at a stop ──
BLOCKED = "blocked"  # how a rank kept at a stop begins its error: the failure line adds the way out


def blocked_error(where: str | None) -> str:
    """A session rank that did not take Ctrl-C (blocked in C++): kept, never killed."""
    return f"{BLOCKED}{f' in {where}' if where else ''}; its namespace is kept"


def blocked_hint(name: str, errors: Sequence[str | None]) -> str:
    """The way out, when a rank was kept blocked at a stop ('' when none was)."""
    if any(error and error.startswith(BLOCKED) for error in errors):
        return f". The blocked ranks still run their cell: {unblock_hint(name)}"
    return ""


def unblock_hint(name: str) -> str:
    return f"%remote session unblock {name} frees them and keeps every variable"


def hang_line(waiting: str, failed: str, seconds: float, waits: dict[str, str], session: str | None) -> str:
    """``hosts=0 (…) still running 2 s after hosts=1 failed, waiting in all_reduce (gloo) …``:
    ``waits`` is each group of waiting ranks' label → where it waits ('' unknown)."""
    known = {label: where for label, where in waits.items() if where}
    if len(known) == 1 and len(waits) == 1:
        where = next(iter(known.values()))
        what = f"{waiting} still running {seconds:.0f} s after {failed} failed, waiting in {where}"
    else:
        what = f"{waiting} still running {seconds:.0f} s after {failed} failed"
        if known:
            what += " (" + "; ".join(f"{label} in {where}" for label, where in known.items()) + ")"
    if session is None:
        return f"{what}: Ctrl-C stops them"
    likely = ": likely waiting for the failed rank" if known else ""
    return f"{what}{likely}. Ctrl-C stops the cell; if they stay blocked, {unblock_hint(session)}"


def mismatch_line(places: dict[str, str], session: str) -> str:
    """Ranks of one cell waiting in different collectives (``places``: each group's label → the
    collective, ``all_reduce (gloo)``): a mismatch, said with the way out; '' when they agree
    or a place is not a collective (``(backend)`` marks one)."""
    ops = {label: where for label, where in places.items() if where.endswith(")") and " (" in where}
    if len(ops) < 2 or len(ops) != len(places) or len(set(ops.values())) < 2:
        return ""
    listed = "; ".join(f"{label} in {where}" for label, where in ops.items())
    return (
        f"collective mismatch: {listed}. Every rank must call the same collectives in the same order "
        f"(with shapes too: %remote session start {session} --torch --check-collectives makes torch raise "
        f"at the first mismatch). Ctrl-C, then {unblock_hint(session)}"
    )
