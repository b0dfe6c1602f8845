"""Where the CPU of a warm ``%%remote`` run goes, process by process and thread by thread.

    .venv/bin/python benchmarks/cpu_budget.py [--n 200] [--code '%%remote bash\\ntrue'] [--pyspy FILE]
                                              [--phases] [--floor] [--timeline] [--gap S]

On a 2-core machine a warm run is bound by CPU as much as by waiting: the kernel, both
workers and their shells all want a core at once. This starts a kernel and a local job
(``--local hosts=2``), warms it, then runs ``--code`` N times (and an empty cell N times)
from a client and reads /proc before and after: on-CPU time per thread (schedstat) of every
process carrying the test tag, grouped by process and thread name, plus the CPU of the
children each process reaped (``cutime + cstime``: a worker's run shells and what they ran),
per run. Every process started here carries a tag and is killed by PID at the end.
``--pyspy FILE``: py-spy samples the kernel (every thread, on CPU only) while ``--code`` runs,
and writes its collapsed stacks to FILE (``-f raw``: one ``stack count`` line each); on a loaded
machine a thread waiting for a core counts as running. ``--phases``: the CPU time
(``time.thread_time``, on whichever thread runs it) of the run's steps inside the kernel
(:data:`PHASES`, each wrapped while ``--code`` runs), per run: exact under any load.
``--floor``: also compare_ipyparallel's engine floor (``ping.call()`` on the warm actors, no
command): what a bare Monarch round trip costs each process.
``--timeline``: when each of :data:`PHASES` starts and ends (wall clock, ``perf_counter``) from
the start of ``RemoteMagics._run``, medians over N more runs with ``--gap`` seconds after each
(default 0.1: a core free when the cell comes); ``Drive._handle`` is named by the message it
handles. Where a run's wall time goes: the kernel's steps before the broadcast, the wait for the
ranks' exits, the steps after them.
"""

from __future__ import annotations

import argparse
import ast
import collections
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from compare_ipyparallel import ENGINE_FLOOR, ENGINE_FLOOR_SETUP, MJ

from harness import TAG_VAR, Kernel, new_tag, reap, tagged_pids

TICK = os.sysconf("SC_CLK_TCK")
# (module, attribute path) of the steps --phases times: the magic on the kernel thread, the drive
# on the owned loop, the files a run writes
PHASES = [
    ("monarch_jupyter.remote.cell.magic", "RemoteMagics._run"),
    ("monarch_jupyter.remote.run.runner", "RemoteRunner.plan"),
    ("monarch_jupyter.remote.run.runner", "RemoteRunner._current"),
    ("monarch_jupyter.remote.run.runner", "RemoteRunner.log_path"),
    ("monarch_jupyter.remote.run.runner", "RemoteRunner.start"),
    ("monarch_jupyter.remote.cell.magic", "RemoteMagics.pump"),
    ("monarch_jupyter.remote.view.model", "RunState.mime_bundle"),
    ("monarch_jupyter.remote.cell.magic", "display_unflushed"),
    ("monarch_jupyter.remote.run.drive", "Drive._broadcast"),
    ("monarch_jupyter.remote.run.drive", "Drive._open_spool"),
    ("monarch_jupyter.remote.run.drive", "Drive._take"),
    ("monarch_jupyter.remote.run.drive", "Drive._handle"),
    ("monarch_jupyter.remote.run.drive", "Drive._finish"),
    ("monarch_jupyter.remote.run.spool", "Spool.close"),
    ("monarch_jupyter.remote.run.index", "RunEntry.save"),
]
# The steps of PHASES wrapped once in the kernel (a second injection is a no-op): each call adds
# its CPU (thread_time) to _phase_cpu for --phases and its wall span to _timeline for --timeline,
# _handle named there by its message's type
_PHASES_ON = """
import collections as _c, functools as _f, importlib as _i, time as _t
def _phase_wrap(module, path):
    owner = _i.import_module(module)
    *outer, name = path.split(".")
    for part in outer:
        owner = getattr(owner, part)
    inner = getattr(owner, name)
    @_f.wraps(inner)
    def timed(*args, **kwargs):
        wall = _t.perf_counter()
        began = _t.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            _phase_cpu[path] += _t.thread_time() - began
            _phase_calls[path] += 1
            label = path + (":" + type(args[1]).__name__ if path == "Drive._handle" else "")
            _timeline.append((label, wall, _t.perf_counter()))
    setattr(owner, name, timed)
if "_timeline" not in globals():
    _phase_cpu, _phase_calls, _timeline = _c.Counter(), _c.Counter(), []
    for _module, _path in PHASES:
        _phase_wrap(_module, _path)
"""


def snapshot(pids: list[int]) -> dict:
    """(pid, process name, thread name) → on-CPU ns; (pid, process name, "reaped children") → ns."""
    out: dict = {}
    for pid in pids:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[(pid, name, "reaped children")] = (int(fields[13]) + int(fields[14])) * 1e9 / TICK
            tasks = os.listdir(f"/proc/{pid}/task")
        except (OSError, ValueError, IndexError):
            continue
        for task in tasks:
            try:
                thread = Path(f"/proc/{pid}/task/{task}/comm").read_text().strip()
                used = int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            key = (pid, name, thread + (" (main)" if task == str(pid) else ""))
            out[key] = out.get(key, 0) + used
    return out


def budget(kernel: Kernel, tag: str, code: str, n: int, pyspy: str | None = None) -> tuple[float, dict]:
    pids = [p for p in tagged_pids(tag) if Path(f"/proc/{p}/comm").exists()]
    kernel_pid = kernel.km.provisioner.pid
    spy = None
    if pyspy:
        command = [str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(kernel_pid), "-o", pyspy]
        spy = subprocess.Popen(
            [*command, "-f", "raw", "--threads", "--rate", "400", "--nonblocking"], stdout=subprocess.DEVNULL
        )
        time.sleep(1.0)  # attached before the first cell
    before = snapshot(pids)
    start = time.monotonic()
    for _ in range(n):
        kernel.ok(code)
    wall = (time.monotonic() - start) / n
    after = snapshot(pids)
    if spy is not None:
        spy.send_signal(signal.SIGINT)  # py-spy writes its samples on Ctrl-C
        spy.wait(60)
    per: dict = collections.Counter()
    for key, value in after.items():
        if key in before:
            pid, name, thread = key
            who = "kernel" if pid == kernel_pid else f"{name} {pid}"
            per[(who, thread)] += (value - before[key]) / n / 1e6
    return wall, per


def phases(kernel: Kernel, code: str, n: int) -> None:
    """Run ``code`` n more times with :data:`PHASES` wrapped; print each one's CPU a run."""
    kernel.ok(f"PHASES = {PHASES!r}\n{_PHASES_ON}")
    for _ in range(n):
        kernel.ok(code)
    shown = kernel.ok("print(repr({k: (v, _phase_calls[k]) for k, v in _phase_cpu.items()}))").stream()
    found = ast.literal_eval(shown.strip())
    print(
        f"phases (thread_time inside the kernel, {n} more runs; a step's time includes the steps it calls):"
    )
    for path, (cpu, calls) in sorted(found.items(), key=lambda item: -item[1][0]):
        print(f"  {path:28s} {cpu * 1e6 / n:8.1f} µs a run ({calls / n:.1f} calls)")


def timeline(kernel: Kernel, code: str, n: int, gap: float) -> None:
    """Run ``code`` n more times, ``gap`` s apart, with :data:`PHASES` timed by the wall clock;
    print each step's median start and end (the k-th call of a step apart) from ``_run``'s start."""
    kernel.ok(f"PHASES = {PHASES!r}\n{_PHASES_ON}")
    walls: list[float] = []
    steps: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for _ in range(n):
        kernel.ok("_timeline.clear()")
        began = time.perf_counter()
        kernel.ok(code)
        walls.append(time.perf_counter() - began)
        found = ast.literal_eval(kernel.ok("print(repr(_timeline))").stream().strip())
        origin = min((b for path, b, _ in found if path == "RemoteMagics._run"), default=None)
        if origin is None:
            continue
        calls: collections.Counter[str] = collections.Counter()
        for path, b, e in sorted(found, key=lambda step: step[1]):
            calls[path] += 1
            steps[f"{path} #{calls[path]}"].append(((b - origin) * 1e3, (e - origin) * 1e3))
        time.sleep(gap)
    # Monarch's own round trip to both workers, timed the same way inside the kernel: the yardstick
    kernel.ok(ENGINE_FLOOR_SETUP)
    pings: list[float] = []
    for _ in range(n):
        shown = kernel.ok(
            f"_b = _t.perf_counter()\n{ENGINE_FLOOR[MJ]}\nprint(_t.perf_counter() - _b)"
        ).stream()
        pings.append(float(shown.strip()) * 1e3)
        time.sleep(gap)
    wall = statistics.median(walls) * 1e3
    print(f"timeline ({n} more runs, {gap} s apart; client round trip {wall:.2f} ms):")
    print(f"  Monarch's ping.call() to both workers, inside the kernel: {statistics.median(pings):.2f} ms")
    print("  step (k-th call)                     start ms   end ms  (ms from RemoteMagics._run's start)")
    for name, spans in sorted(steps.items(), key=lambda item: statistics.median(s for s, _ in item[1])):
        start, end = statistics.median(s for s, _ in spans), statistics.median(e for _, e in spans)
        print(f"  {name:36s} {start:8.2f} {end:8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--code", default="%%remote bash\ntrue")
    parser.add_argument("--pyspy", help="write py-spy's collapsed stacks of the kernel during --code here")
    parser.add_argument("--phases", action="store_true", help="the CPU of the run's steps in the kernel")
    parser.add_argument(
        "--floor", action="store_true", help="also Monarch's bare round trip to both workers (ping.call())"
    )
    parser.add_argument("--timeline", action="store_true", help="when the run's steps start and end (wall)")
    parser.add_argument("--gap", type=float, default=0.1, help="--timeline: seconds after each run")
    opts = parser.parse_args()
    code = opts.code.replace("\\n", "\n")
    folder = Path(tempfile.mkdtemp(prefix="bench-cpu-"))
    tag = new_tag()
    os.environ[TAG_VAR] = tag
    os.environ["IPYTHONDIR"] = str(folder / "ipython")
    kernel = Kernel(folder, tag)
    try:
        kernel.ok("%load_ext monarch_jupyter", 120)
        kernel.ok("%job apply --local hosts=2", 300)
        for _ in range(20):
            kernel.ok(code)
            kernel.ok("pass")
        cells = [("empty cell", "pass"), (code.replace("\n", " ⏎ "), code)]
        if opts.floor:  # compare_ipyparallel's engine floor, on the warm actors of the runs above
            kernel.ok("%%remote bash\ntrue")
            kernel.ok(ENGINE_FLOOR_SETUP)
            cells.append(("Monarch's floor (ping.call() to both workers)", ENGINE_FLOOR[MJ]))
        for label, cell in cells:
            wall, per = budget(kernel, tag, cell, opts.n, opts.pyspy if cell == code else None)
            print(f"{label}: {wall * 1e3:.2f} ms a run (client round trip, back to back); CPU ms a run:")
            totals: dict = collections.Counter()
            for (who, thread), ms in sorted(per.items(), key=lambda item: -item[1]):
                totals[who] += ms
                if ms >= 0.05:
                    print(f"  {who:24s} {thread:28s} {ms:6.2f}")
            print("  " + ", ".join(f"{who} {ms:.2f}" for who, ms in totals.most_common() if ms >= 0.05))
            print(f"  all: {sum(totals.values()):.2f} ms of CPU a run")
        if opts.phases:
            phases(kernel, code, opts.n)
        if opts.timeline:
            timeline(kernel, code, opts.n, opts.gap)
        kernel.ok("%job kill", 60)
    finally:
        try:
            kernel.shutdown()
        finally:
            reap(tag)
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
