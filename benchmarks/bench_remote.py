"""Measure %%remote against its targets, in one run, on a real kernel.

    /work/.venv-dev/bin/python benchmarks/bench_remote.py [--quick]

Starts a kernel (jupyter_client) in a temporary folder, applies
``--local hosts=2``, and prints a table: metric, measured, target, ratio
(measured / target; ≤ 1 meets the target). Every process it starts carries a
tag and is reaped at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import scratch_kernel, tagged_pids
from monarch_jupyter.remote.run.spool import read_log

MIME = "application/vnd.monarch.remote+json"


def bundle(result):
    for o in result.outputs:
        if o.msg_type == "display_data" and MIME in o.content["data"]:
            return o.content["data"][MIME]
    raise RuntimeError(f"no remote bundle in {result.text[-500:]!r}")


def ok(k, code, timeout=300):
    r = k.execute(code, timeout)
    if r.error:
        raise RuntimeError(f"{code[:60]!r} failed: {r.error['evalue']}")
    return r


def kernel_rss(k) -> float:
    r = ok(k, "print(open('/proc/self/status').read())")
    for line in r.stream().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mb(pids) -> float:
    """Resident memory of these processes together (MB; those gone are skipped)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def max_per_second(outputs) -> int:
    """The most messages that arrived within any 1 s window."""
    times = sorted(o.t for o in outputs)
    return max((sum(1 for u in times if t <= u < t + 1.0) for t in times), default=0)


def p95(values):
    values = sorted(values)
    return values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, skip exec_command")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument(
        "--per-host",
        type=int,
        default=16,
        help="ranks per host of the many-ranks measure (2 hosts: 16 → 32 ranks, 32 → 64 ranks)",
    )
    opts = parser.parse_args()
    rows = []  # (metric, measured, unit, target, ratio or None)

    def row(metric, measured, unit, target, lower_is_better=True):
        ratio = None if target is None else (measured / target if lower_is_better else target / measured)
        rows.append((metric, measured, unit, target, ratio))
        print(f"  {metric}: {measured:.3f} {unit}", flush=True)

    with scratch_kernel("bench-remote-") as k:
        folder, tag = k.cwd, k.tag
        ok(k, "%load_ext monarch_jupyter")
        ok(k, "%job apply --local hosts=2")
        t = time.monotonic()
        ok(k, "%remote true")
        row("first %remote (spawns the actors)", time.monotonic() - t, "s", None)

        # 1. warm latency, client round trip (execute request → idle), vs an empty cell
        n = 20 if opts.quick else 60
        for _ in range(5):
            ok(k, "%%remote bash\ntrue")
        warm = [ok(k, "%%remote bash\ntrue").duration for _ in range(n)]
        empty = [ok(k, "pass").duration for _ in range(n)]
        inside = ok(
            k,
            (
                "import time as _t, statistics as _s\n"
                "_m = get_ipython().find_cell_magic('remote')\n"
                "_d = []\n"
                f"for _i in range({n}):\n"
                "    _a = _t.perf_counter(); _m('--quiet', 'true'); _d.append(_t.perf_counter() - _a)\n"
                "print(_s.median(_d))"
            ),
        )
        row("warm %%remote bash true, median (client round trip)", statistics.median(warm) * 1e3, "ms", 10.0)
        row("  same, p95", p95(warm) * 1e3, "ms", None)
        row("  empty cell round trip, median (kernel floor)", statistics.median(empty) * 1e3, "ms", None)
        row(
            "  magic alone inside the kernel, median (--quiet)",
            float(inside.stream().split()[-1]) * 1e3,
            "ms",
            None,
        )
        row(
            "  ratio to ipyparallel %%px (12.8 ms, peers.md)", statistics.median(warm) * 1e3 / 12.8, "x", None
        )

        # 2. first-line latency: remote stamps time.time() and prints; we stamp arrival
        lat = []

        def on_output(out):
            if out.msg_type != "stream":
                return
            now = time.time()
            for line in out.content["text"].splitlines():
                if "STAMP" in line:
                    lat.append(now - float(line.split("STAMP")[1]))

        code = (
            "%%remote python\n"
            "import time\n"
            "for i in range(25):\n"
            "    print('STAMP%.6f' % time.time(), flush=True); time.sleep(0.13)\n"
        )
        k.execute(code, 60, on_output=on_output)
        row("first line visible on IOPub after remote print, p95", p95(lat) * 1e3, "ms", 100.0)
        row("  same, median", statistics.median(lat) * 1e3, "ms", None)

        # 3. flood: seq 1000000 on 4 ranks (2 hosts × 2 per host)
        ok(k, "%remote --per-host gpu=2 true")
        rss0 = kernel_rss(k)
        t = time.monotonic()
        r = ok(k, "%remote --per-host gpu=2 seq 1000000", timeout=600)
        flood = time.monotonic() - t
        rss1 = kernel_rss(k)
        b = bundle(r)
        log = read_log(Path(folder, b["log_path"]))
        expected = [str(i) for i in range(1, 1_000_001)]
        spooled = sum(len(v) for key, v in log.items() if key != "#" and v == expected)
        streams = [o for o in r.outputs if o.msg_type == "stream"]
        with tempfile.TemporaryDirectory() as tmp:
            t = time.monotonic()
            subprocess.run(
                ["bash", "-c", f"for i in 1 2 3 4; do seq 1000000 | cat > {tmp}/f$i & done; wait"], check=True
            )
            local = time.monotonic() - t
        row("seq 1000000 × 4 ranks: lines spooled", spooled, "lines", 4_000_000, lower_is_better=False)
        row("  kernel RSS growth", rss1 - rss0, "MB", 100.0)
        row("  cell duration (client round trip)", flood * 1e3, "ms", None)
        row("  local: 4 × seq 1000000 | cat > file, in parallel", local * 1e3, "ms", None)
        row("  cell duration / local", flood / local, "x", 3.0)
        row("  IOPub stream messages, most in any 1 s", max_per_second(streams), "msg", 20.0)
        row("  characters shown in the cell", len(r.stream()), "chars", None)

        # 4. many ranks at once (2 hosts × --per-host), every line checked in the log
        lines_per_rank = 2000
        wide, ranks = opts.per_host, 2 * opts.per_host
        ok(k, f"%remote --per-host gpu={wide} true", timeout=300)
        kernel_pid = k.km.provisioner.pid
        workers_rss0 = rss_mb([p for p in tagged_pids(tag) if p != kernel_pid])
        kernel_rss0 = kernel_rss(k)
        r = ok(
            k,
            (
                f"%%remote --per-host gpu={wide} python\n"
                "import os\n"
                "h, g = os.environ['MONARCH_RANK_hosts'], os.environ['MONARCH_RANK_gpu']\n"
                f"for i in range({lines_per_rank}):\n"
                "    print(h, g, i)\n"
            ),
            timeout=300,
        )
        b = bundle(r)
        log = read_log(Path(folder, b["log_path"]))
        seen: dict[str, list[int]] = {}
        bad = 0
        for label, lines in log.items():
            if label == "#":
                continue
            for line in lines:
                h, g, i = line.split()
                if label != f"hosts={h},gpu={g}":
                    bad += 1
                seen.setdefault(label, []).append(int(i))
        complete = sum(1 for v in seen.values() if v == list(range(lines_per_rank)))
        busy = [o for o in r.outputs if o.msg_type == "stream"]
        row(
            f"{ranks} ranks streaming: ranks with every line, in order",
            complete,
            "ranks",
            ranks,
            lower_is_better=False,
        )
        row("  mis-labelled lines", bad, "lines", None)
        row("  IOPub stream messages, most in any 1 s", max_per_second(busy), "msg", 20.0)
        row("  kernel RSS after the run", kernel_rss(k), "MB", None)
        row("    growth", kernel_rss(k) - kernel_rss0, "MB", None)
        row(
            "  workers and their procs, RSS together",
            rss_mb([p for p in tagged_pids(tag) if p != kernel_pid]),
            "MB",
            None,
        )
        row(
            "    growth over the run",
            rss_mb([p for p in tagged_pids(tag) if p != kernel_pid]) - workers_rss0,
            "MB",
            None,
        )

        # 4b. a steady stream: 8 ranks printing 200 lines/s each for 3 s
        r = ok(
            k,
            (
                "%%remote --per-host gpu=4 python\n"
                "import time\n"
                "for i in range(600):\n"
                "    print('line', i, flush=True); time.sleep(0.005)\n"
            ),
            timeout=120,
        )
        steady = [o for o in r.outputs if o.msg_type == "stream"]
        row(
            "8 ranks × 200 lines/s for 3 s: IOPub messages, most in any 1 s",
            max_per_second(steady),
            "msg",
            20.0,
        )

        # 5. interrupt: time from Ctrl-C to the cell ending, processes gone
        import threading

        def later():
            time.sleep(1.0)
            nonlocal t_int
            t_int = time.monotonic()
            k.interrupt()

        t_int = 0.0
        threading.Thread(target=later, daemon=True).start()
        k.execute("%remote sleep 60", 30)
        row("interrupt → cell ended, remote processes stopped", time.monotonic() - t_int, "s", 1.0)

        # 6. exec_command for comparison (slow: spawns procs every call)
        if not opts.quick:
            r = ok(
                k,
                (
                    "import time, monarch_jupyter\n"
                    "from monarch.job import exec_command\n"
                    "from monarch_jupyter.runtime.chatter import quietly\n"
                    "_s = monarch_jupyter.current_session(); _hm = _s.host_meshes()['hosts']\n"
                    "def _one():\n"
                    "    with quietly():\n"
                    "        return exec_command(_hm, ['true']).get()\n"
                    "_t = time.perf_counter(); _s.loop.call(_one); _s.loop.call(_one); print((time.perf_counter() - _t) / 2)"
                ),
                timeout=120,
            )
            ex = float(r.stream().split()[-1])
            row("exec_command(['true']) in the same kernel (for comparison)", ex * 1e3, "ms", None)
            row("  exec_command / warm %%remote", ex / statistics.median(warm), "x", None)
        ok(k, "%job kill", timeout=60)

    print()
    print(f"{'metric':<58} {'measured':>14} {'target':>12} {'ratio':>7}")
    for metric, measured, unit, target, ratio in rows:
        m = f"{measured:,.1f} {unit}" if not float(measured).is_integer() else f"{int(measured):,} {unit}"
        tgt = "" if target is None else (f"{target:,g} {unit}")
        rt = "" if ratio is None else f"{ratio:.2f}"
        print(f"{metric:<58} {m:>14} {tgt:>12} {rt:>7}")
    print("ratio = measured / target (targets met when ≤ 1; for counts, target / measured)")
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
