"""After a kernel restart, two source trees side by side: ``%load_ext``, the first ``%job``, and
``%job kill`` right after the load, alternated run by run.

    .venv/bin/python benchmarks/bench_restart.py BEFORE_DIR AFTER_DIR [--n 8] [--pause S] [--first CODE]

``--first '%%remote bash\ntrue'`` times that instead of ``%job`` (each job runs it once after
its apply, so the context has a run recorded, as a notebook that used ``%%remote`` has).

Each tree gets its own kernel and folder (``PYTHONPATH`` puts the tree first) with a
``%job apply --local hosts=2``; each round restarts both kernels in turn (order alternated),
times ``%load_ext monarch_jupyter`` then ``%job`` (wall time, and the CPU time of the kernel's
main thread for each cell), restarts again and times ``%job kill`` right after the load, then
applies again. Medians (min–max) per tree; the load average is printed with them, since the
machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _trees import compiled

from harness import Kernel, new_tag, reap


def timed(kernel: Kernel, code: str) -> float:
    result = kernel.execute(code, timeout=300)
    if result.error or "UsageError" in result.text:
        raise SystemExit(f"{code!r} failed: {result.text}")
    return result.duration * 1000


def timed_cpu(kernel: Kernel, code: str) -> tuple[float, float]:
    """The cell's wall time and the CPU time of the kernel's main thread for it (a loaded machine
    inflates it far less than wall time; the background attach's thread is not counted), in ms."""
    if code.startswith("%%"):  # a cell magic must open its cell: called through IPython instead
        magic, _, body = code[2:].partition("\n")
        name, _, line = magic.partition(" ")
        code = f"get_ipython().run_cell_magic({name!r}, {line!r}, {body!r})"
    wrapped = (
        f"import time as _t\n_c = _t.thread_time()\n{code}\nprint('CPU_MS', (_t.thread_time() - _c) * 1000)"
    )
    result = kernel.execute(wrapped, timeout=300)
    if result.error or "UsageError" in result.text or "CPU_MS" not in result.text:
        raise SystemExit(f"{code!r} failed: {result.text}")
    return result.duration * 1000, float(result.text.split("CPU_MS", 1)[1].split()[0])


def restart(kernel: Kernel) -> None:
    kernel.km.restart_kernel(now=True)
    kernel.kc.wait_for_ready(timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2, metavar="TREE")
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument(
        "--pause",
        type=float,
        default=0.0,
        metavar="S",
        help="also time a first command typed S s after the load (another restart a round)",
    )
    parser.add_argument("--first", default="%job", help="the first command after the load (default %%job)")
    args = parser.parse_args()
    first_code = args.first.replace("\\n", "\n")
    label = first_code.replace("\n", " ")
    tag = new_tag()
    figures: dict[str, dict[str, list[float]]] = {tree: {} for tree in args.trees}
    with tempfile.TemporaryDirectory() as folder:
        kernels = {}
        try:
            for i, tree in enumerate(args.trees):
                cwd = Path(folder) / str(i)
                cwd.mkdir()
                env = {"PYTHONPATH": str(compiled(tree))}
                kernels[tree] = kernel = Kernel(cwd, tag, env)
                timed(kernel, "%load_ext monarch_jupyter")
                timed(kernel, "%job apply --local hosts=2")
                if first_code != "%job":
                    timed(kernel, first_code)
            print(f"load average before: {os.getloadavg()}")
            for n in range(args.n):
                for tree in args.trees if n % 2 == 0 else reversed(args.trees):
                    kernel, steps = kernels[tree], figures[tree]
                    restart(kernel)
                    loaded, loaded_cpu = timed_cpu(kernel, "%load_ext monarch_jupyter")
                    first, first_cpu = timed_cpu(kernel, first_code)
                    steps.setdefault("%load_ext after restart", []).append(loaded)
                    steps.setdefault(f"then {label}", []).append(first)
                    steps.setdefault(f"load + first {label}", []).append(loaded + first)
                    steps.setdefault("  kernel CPU: %load_ext", []).append(loaded_cpu)
                    steps.setdefault(f"  kernel CPU: then {label}", []).append(first_cpu)
                    steps.setdefault("  kernel CPU: load + first", []).append(loaded_cpu + first_cpu)
                    if args.pause:
                        restart(kernel)
                        timed(kernel, "%load_ext monarch_jupyter")
                        time.sleep(args.pause)  # the background attach and the preload run meanwhile
                        later, later_cpu = timed_cpu(kernel, first_code)
                        steps.setdefault(f"{label} {args.pause:g} s after the load", []).append(later)
                        steps.setdefault(f"  kernel CPU: {args.pause:g} s after", []).append(later_cpu)
                    restart(kernel)
                    timed(kernel, "%load_ext monarch_jupyter")
                    steps.setdefault("%job kill right after the load", []).append(timed(kernel, "%job kill"))
                    timed(kernel, "%job apply --local hosts=2")
                    if first_code != "%job":
                        timed(kernel, first_code)
            print(f"load average after: {os.getloadavg()}")
        finally:
            for kernel in kernels.values():
                kernel.shutdown()
            reap(tag)
    names = list(figures[args.trees[0]])
    print(f"{'step (ms, median (min-max))':34} " + "  ".join(f"{t[-28:]:>28}" for t in args.trees))
    for name in names:
        cells = []
        for tree in args.trees:
            values = figures[tree][name]
            cells.append(f"{statistics.median(values):8.1f} ({min(values):.0f}-{max(values):.0f})")
        print(f"{name:34} " + "  ".join(f"{c:>28}" for c in cells))


if __name__ == "__main__":
    main()
