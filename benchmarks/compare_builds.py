"""Two source trees of monarch_jupyter side by side: the kernel-side cost of a change.

    .venv/bin/python benchmarks/compare_builds.py BEFORE_DIR AFTER_DIR [--n 60] [--n-line 20]

Each DIR holds a ``monarch_jupyter`` package (e.g. ``git archive main monarch_jupyter |
tar -x -C /tmp/before`` and this checkout). Starts one IPython kernel per tree (its
``PYTHONPATH`` puts the tree first), each with its own ``%job apply --local hosts=2``,
and alternates them run by run (which goes first alternates too), so both see the
same machine noise. Figures are client round trips as in
``compare_ipyparallel.py`` (execute request → idle on IOPub; for the first line the
arrival of the stream message that carries it), the kernel's own busy → idle time
(from its message timestamps), the kernel's CPU time per run (its main thread, which
runs the cell, and all its threads, from /proc schedstat: the least noisy figures on
a shared machine) and how many output
messages (stream, display_data, …) a run sends on IOPub. ``--n-flood N`` adds ``seq 1000000`` on
4 ranks against four local ``seq 1000000 | cat > file`` run in parallel. ``--gap S`` waits S
seconds after each run (as between a user's cells): what either side does in the background
after a run (the workers start the next run's shell) then lands in the gap, not in the other
side's run.

Every process started here carries a tag and is killed by PID at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _trees import compiled
from compare_ipyparallel import FIRST_A, FIRST_LINE, MJ, add_gap, ok

from harness import TAG_VAR, Kernel, new_tag, reap

FLOOD = "%remote --per-host gpu=2 seq 1000000"
LOCAL_FLOOD = "for i in 1 2 3 4; do seq 1000000 | cat > {tmp}/f$i & done; wait"
MEASURES = {
    "empty cell": "pass",
    "warm %%remote bash true": "%%remote bash\ntrue",
    "warm %remote echo hi": "%remote echo hi",
}


@dataclass
class Run:
    round_trip: float  # execute request sent → idle received (client clock)
    in_kernel: float  # busy → idle (kernel's own message timestamps)
    main_cpu: float  # CPU seconds of the kernel's main thread
    cpu: float  # CPU seconds of every thread of the kernel process
    outputs: int  # stream / display / error messages on IOPub
    first_line: float | None  # arrival of the first stream with line "a"


def cpu_seconds(pid: int) -> tuple[float, float]:
    """On-CPU time of ``pid``'s main thread (the one that runs cells) and of all its
    threads (schedstat: nanoseconds)."""
    total = main = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            used = int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
            total += used
            if task == str(pid):
                main = used
    return main / 1e9, total / 1e9


def execute(kernel: Kernel, code: str, timeout: float = 120) -> Run:
    pid = kernel.km.provisioner.pid
    cpu0 = cpu_seconds(pid)
    start = time.monotonic()
    msg_id = kernel.kc.execute(code)
    busy = idle = None
    outputs, first_line, error = 0, None, None
    while True:
        msg = kernel.kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["msg_type"]
        if kind == "status":
            state = msg["content"]["execution_state"]
            if state == "busy":
                busy = msg["header"]["date"]
            elif state == "idle":
                idle = msg["header"]["date"]
                break
        elif kind in ("stream", "display_data", "update_display_data", "execute_result", "error"):
            outputs += 1
            if kind == "error":
                error = msg["content"]
            if first_line is None and kind == "stream" and FIRST_A.search(msg["content"]["text"]):
                first_line = time.monotonic() - start
    round_trip = time.monotonic() - start
    if error:
        raise RuntimeError(f"{code[:60]!r} failed: {error['ename']}: {error['evalue']}")
    cpu1 = cpu_seconds(pid)
    return Run(
        round_trip, (idle - busy).total_seconds(), cpu1[0] - cpu0[0], cpu1[1] - cpu0[1], outputs, first_line
    )


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
    parser.add_argument(
        "--n-flood",
        type=int,
        default=0,
        help="repetitions of seq 1000000 on 4 ranks (--per-host gpu=2), against 4 local seq | cat",
    )
    add_gap(parser)
    opts = parser.parse_args()
    trees = [str(compiled(t)) for t in opts.trees]
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

        def alternate(code: str, count: int, warmup: int = 5) -> dict[str, list[Run]]:
            runs: dict[str, list[Run]] = {n: [] for n in names}
            for name in names:
                for _ in range(warmup):
                    execute(kernels[name], code)
            for i in range(count):
                for name in names if i % 2 == 0 else names[::-1]:
                    runs[name].append(execute(kernels[name], code))
                    time.sleep(opts.gap)
            return runs

        for label, code in MEASURES.items():
            runs = alternate(code, opts.n)
            print(f"{label}:")
            for name in names:
                got = runs[name]
                print(
                    f"  {name:6} round trip {quartiles([r.round_trip for r in got])}"
                    f"  in kernel {quartiles([r.in_kernel for r in got])}"
                    f"  CPU main thread {statistics.median(r.main_cpu for r in got) * 1e3:.2f} ms"
                    f" all {statistics.median(r.cpu for r in got) * 1e3:.2f} ms"
                    f"  outputs/run {statistics.median(r.outputs for r in got):g}",
                    flush=True,
                )
        runs = alternate(FIRST_LINE[MJ], opts.n_line, warmup=1)
        print("first remote line (echo a; sleep 1; echo b):")
        for name in names:
            print(f"  {name:6} {quartiles([r.first_line for r in runs[name]])}", flush=True)
        if opts.n_flood:
            runs = alternate(FLOOD, opts.n_flood, warmup=1)
            local = []
            for _ in range(opts.n_flood):
                with tempfile.TemporaryDirectory() as tmp:
                    start = time.monotonic()
                    subprocess.run(["bash", "-c", LOCAL_FLOOD.format(tmp=tmp)], check=True)
                    local.append(time.monotonic() - start)
            floor = statistics.median(local)
            print(f"{FLOOD} (4 local seq | cat > file: {floor * 1e3:.1f} ms):")
            for name in names:
                flood = statistics.median(r.round_trip for r in runs[name])
                print(
                    f"  {name:6} {quartiles([r.round_trip for r in runs[name]])} = {flood / floor:.2f}× local"
                )
    finally:
        for kernel in kernels.values():
            with contextlib.suppress(Exception):
                kernel.shutdown()
        reap(tag)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
