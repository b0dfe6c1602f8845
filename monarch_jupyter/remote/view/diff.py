"""``%%remote --diff``: after the run, each outlier's output as a diff against the most common
output (pure: no Monarch, no threads; :mod:`difflib`).

Ranks with identical output (their kept tail, stderr lines marked ``[err]`` as ``--group`` shows
them) form groups; the largest is the majority (on a tie, the group of the lowest rank). Each
other group gets a unified diff from the majority::

    --diff: hosts=[0-2,4-7] (7) agree; 1 outlier
    --- hosts=[0-2,4-7] (7)
    +++ hosts=3
    @@ -1,3 +1,3 @@
     step 1
    -loss 0.5
    +loss nan
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from .model import OUT, RankState, RunState
from .quiet import ranks_label

CONTEXT = 2  # lines of context around each change
MAX_DIFF_LINES = 200  # per outlier group


def output_of(rank: RankState) -> tuple[str, ...]:
    """The rank's kept output as ``--group`` shows it: stderr lines marked ``[err]``."""
    return tuple(line if stream == OUT else "[err] " + line for stream, line in rank.lines)


def groups(ranks: Sequence[RankState]) -> list[tuple[tuple[str, ...], list[RankState]]]:
    """Ranks with identical output, the majority first (largest; on a tie, the lowest rank's)."""
    by_output: dict[tuple[str, ...], list[RankState]] = {}
    for rank in ranks:
        by_output.setdefault(output_of(rank), []).append(rank)
    return sorted(by_output.items(), key=lambda item: -len(item[1]))  # stable: first seen wins ties


def _label(members: list[RankState]) -> str:
    return ranks_label(members) + (f" ({len(members)})" if len(members) > 1 else "")


def diff_text(state: RunState) -> str:
    """The text ``--diff`` writes after the run ('' for a run of one rank)."""
    if len(state.ranks) < 2:
        return ""
    found = groups(state.ranks)
    (common, majority), outliers = found[0], found[1:]
    if not outliers:
        return f"--diff: all {len(state.ranks)} ranks printed the same\n"
    count = sum(len(m) for _, m in outliers)
    out = [f"--diff: {_label(majority)} agree; {count} outlier{'s' if count != 1 else ''}"]
    if len(majority) == 1:
        out[0] += " (no majority: each differs; the diffs are against the first rank)"
    if any(r.truncated for r in state.ranks):
        out.append("(each rank's last lines are compared; the log has them all)")
    for lines, members in outliers:
        diff = list(
            difflib.unified_diff(
                list(common),
                list(lines),
                fromfile=_label(majority),
                tofile=_label(members),
                lineterm="",
                n=CONTEXT,
            )
        )
        if len(diff) > MAX_DIFF_LINES:
            diff = [*diff[:MAX_DIFF_LINES], f"… {len(diff) - MAX_DIFF_LINES} more lines of diff"]
        out.extend(diff)
    return "\n".join(out) + "\n"
