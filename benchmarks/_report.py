"""Tables the benchmarks print: one place for their layout."""

from __future__ import annotations

import statistics


def print_steps(steps: dict[str, list[float]], repeat: int, setting: str) -> None:
    """One row per step: median and max of its timings in ms."""
    width = max(len(k) for k in steps)
    print(f"{'step':<{width}}  median ms  max ms   (n={repeat}, {setting})")
    for name, values in steps.items():
        print(f"{name:<{width}}  {statistics.median(values):9.1f}  {max(values):6.1f}")
