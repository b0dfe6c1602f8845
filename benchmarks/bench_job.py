"""Time the %job lifecycle in a real kernel with real ProcessJob workers.

    python benchmarks/bench_job.py [--repeat 5] [--warm 5]

Prints one table: median and max of each step over the repeats. ``%job status (first)`` is the
first ``%job`` of the kernel (the widget's imports and model included), ``(warm)`` the ones
after it, and ``(first after load)`` the first ``%job`` after a restart and ``%load_ext``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _report import print_steps

from harness import Kernel, new_tag, reap


def timed(kernel: Kernel, code: str) -> float:
    result = kernel.execute(code)
    if result.error or "UsageError" in result.text:
        raise SystemExit(f"{code!r} failed: {result.text}")
    return result.duration * 1000


def restart(kernel: Kernel) -> None:
    kernel.km.restart_kernel(now=True)
    kernel.kc.wait_for_ready(timeout=60)


def timed_status(kernel: Kernel, steps: dict[str, list[float]], name: str) -> None:
    """``%job`` timed twice: the cell's wall time and the kernel's CPU time for it (all threads),
    which a loaded machine inflates far less than wall time."""
    code = "import time as _t\n_c = _t.process_time()\n%job\nprint('CPU_MS', (_t.process_time() - _c) * 1000)"
    result = kernel.execute(code)
    if result.error or "CPU_MS" not in result.text:
        raise SystemExit(f"%job failed: {result.text}")
    steps.setdefault(name, []).append(result.duration * 1000)
    cpu = float(result.text.split("CPU_MS", 1)[1].split()[0])
    steps.setdefault(f"{name}, kernel CPU", []).append(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warm", type=int, default=5, help="warm %%job calls per repeat")
    args = parser.parse_args()
    steps: dict[str, list[float]] = {}
    tag = new_tag()
    try:
        with tempfile.TemporaryDirectory() as folder:
            for _ in range(args.repeat):
                kernel = Kernel(Path(folder), tag)
                try:
                    steps.setdefault("%load_ext, no job (imports)", []).append(
                        timed(kernel, "%load_ext monarch_jupyter")
                    )
                    steps.setdefault("%job apply --local hosts=2 (cold)", []).append(
                        timed(kernel, "%job apply --local hosts=2")
                    )
                    steps.setdefault("%job apply, already running (no-op)", []).append(
                        timed(kernel, "%job apply --local hosts=2")
                    )
                    time.sleep(1.0)  # a person reads the apply line before typing
                    steps.setdefault("an empty cell (the floor, at this load)", []).append(
                        timed(kernel, "pass")
                    )
                    timed_status(kernel, steps, "%job status (first)")
                    for _ in range(args.warm):
                        timed_status(kernel, steps, "%job status (warm)")
                    restart(kernel)
                    loaded = timed(kernel, "%load_ext monarch_jupyter")
                    first = timed(kernel, "%job")
                    steps.setdefault("%load_ext after restart (re-attach)", []).append(loaded)
                    steps.setdefault("  then %job (first command)", []).append(first)
                    steps.setdefault("  load + first command", []).append(loaded + first)
                    restart(kernel)
                    loaded = timed(kernel, "%load_ext monarch_jupyter")
                    steps.setdefault("%job kill right after %load_ext after restart", []).append(
                        timed(kernel, "%job kill")
                    )
                    timed(kernel, "%job apply --local hosts=2")
                    restart(kernel)
                    timed(kernel, "%load_ext monarch_jupyter")
                    timed(kernel, "import monarch_jupyter; monarch_jupyter.job();")  # attached
                    steps.setdefault("%job kill, attached (Monarch's kill)", []).append(
                        timed(kernel, "%job kill")
                    )
                finally:
                    kernel.shutdown()
    finally:
        reap(tag)
    print_steps(steps, args.repeat, "2-host ProcessJob, real kernel")


if __name__ == "__main__":
    main()
