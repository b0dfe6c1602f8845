"""Two source trees of monarch_jupyter side by side: the kernel-side cost of a change.

    .venv/bin/python benchmarks/compare_builds.py BEFORE_DIR AFTER_DIR [--n 60] [--n-line 20]

Each DIR holds a ``monarch_jupyter`` package (e.g. ``git archive main monarch_jupyter |
tar -x -C /tmp/before`` and this checkout). Starts one IPython kernel per tree (its
``PYTHONPATH`` puts the tree first), each with its own ``%job apply --local hosts=2``,
and alternates them run by run (which goes first alternates too), so both see the
same machine noise. Figures are client round trips as in
``compare_ipyparallel.py``: execute request → idle on IOPub, and for the first line
the arrival of the stream message that carries it. Also prints how many output
messages (stream, display_data, …) a warm ``true`` sends on IOPub.

Every process started here carries a tag and is killed by PID at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from compare_ipyparallel import FIRST_LINE, MJ, first_line_time, ok  # noqa: E402
from harness import TAG_VAR, Kernel, new_tag, reap  # noqa: E402

MEASURES = {
    "empty cell": "pass",
    "warm %%remote bash true": "%%remote bash\ntrue",
    "warm %remote echo hi": "%remote echo hi",
}


def quartiles(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    return f"{statistics.median(values) * 1e3:6.2f} ms (IQR {q[0] * 1e3:.2f}–{q[2] * 1e3:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2, help="BEFORE_DIR AFTER_DIR, each holding monarch_jupyter/")
    parser.add_argument("--n", type=int, default=60, help="repetitions of the fast measures")
    parser.add_argument(
        "--n-line", type=int, default=20, help="repetitions of the first-line measure (1 s each)"
    )
    opts = parser.parse_args()
    trees = [str(Path(t).resolve()) for t in opts.trees]
    names = ["before", "after"]

    folder = Path(tempfile.mkdtemp(prefix="bench-builds-"))
    tag = new_tag()
    os.environ[TAG_VAR] = tag
    os.environ["IPYTHONDIR"] = str(folder / "ipython")
    kernels: dict[str, Kernel] = {}
    try:
        for name, tree in zip(names, trees, strict=True):
            (folder / name).mkdir()
            kernel = kernels[name] = Kernel(folder / name, tag, extra_env={"PYTHONPATH": tree})
            ok(kernel, "%load_ext monarch_jupyter", 120)
            where = ok(kernel, "import monarch_jupyter; print(monarch_jupyter.__file__)").text.strip()
            if not where.startswith(tree):
                raise RuntimeError(f"{name}: monarch_jupyter imported from {where}, not {tree}")
            ok(kernel, "%job apply --local hosts=2", 300)

        def alternate(code: str, count: int, measure=lambda r: r.duration, warmup: int = 5):
            values: dict[str, list[float]] = {n: [] for n in names}
            messages: dict[str, list[int]] = {n: [] for n in names}
            for name in names:
                for _ in range(warmup):
                    ok(kernels[name], code)
            for i in range(count):
                for name in names if i % 2 == 0 else names[::-1]:
                    result = ok(kernels[name], code)
                    values[name].append(measure(result))
                    messages[name].append(len(result.outputs))
            return values, messages

        for label, code in MEASURES.items():
            values, messages = alternate(code, opts.n)
            print(f"{label}:")
            for name in names:
                print(
                    f"  {name:6} {quartiles(values[name])}  outputs/run {statistics.median(messages[name]):g}",
                    flush=True,
                )
        values, _ = alternate(FIRST_LINE[MJ], opts.n_line, measure=first_line_time, warmup=1)
        print("first remote line (echo a; sleep 1; echo b):")
        for name in names:
            print(f"  {name:6} {quartiles(values[name])}", flush=True)
    finally:
        for kernel in kernels.values():
            with contextlib.suppress(Exception):
                kernel.shutdown()
        reap(tag)


if __name__ == "__main__":
    main()
