"""%%remote next to ipyparallel's %%px, measured in one run through real kernels.

    .venv/bin/python benchmarks/compare_ipyparallel.py [--n 60] [--n-slow 10] [--gap S]
                                                       [--ipp-venv DIR] [--json FILE]

ipyparallel lives in its own virtualenv, made here on first use (``--ipp-venv``, default
``~/.cache/monarch_jupyter/bench-ipyparallel``: ``python -m venv`` then ``pip install
ipyparallel==9.*`` from PyPI), so it never touches the project's environment. Starts, in
temporary folders:
- an IPython kernel with ``%load_ext monarch_jupyter`` and ``%job apply --local hosts=2``
  (two worker processes);
- an ipyparallel cluster of 2 engines and a controller on 127.0.0.1 (started
  here from that venv, stopped at the end) and an IPython kernel of that venv connected to
  it with ``Client(...).activate()`` (the ``%%px`` magics).

Every figure is a client round trip as a notebook sees it: execute request →
status idle on IOPub (jupyter_client), except "first remote line", which is the
arrival of the first stream message carrying the line. The two systems run
alternately (which goes first alternates too), and the table shows medians and the 90th
percentile. Flood and restart measures repeat ``--n-slow`` times. The table is the one of
issue 45: each row's distance to its engine's floor is printed under it.

Every process started here carries a tag in its environment and is killed by
PID at the end (``tests/harness.py``), whatever happens.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import TAG_VAR, Kernel, new_tag, reap, tagged_pids

ENGINES = 2
MJ, PX = "%%remote", "%%px"

# What each system runs for each measure (the ipyparallel side as a user would
# write it: the engines are Python, so a shell command is a subprocess).
WARM = {MJ: "%%remote bash\ntrue", PX: "%%px\nsubprocess.run(['true'])"}
_PIPE = (
    "%%px --stream\n"
    "_p = subprocess.Popen({argv!r}, stdout=subprocess.PIPE)\n"
    "for _b in iter(lambda: os.read(_p.stdout.fileno(), 65536), b''):\n"
    "    sys.stdout.write(_b.decode()); sys.stdout.flush()\n"
    "_rc_ = _p.wait()"
)
FIRST_LINE = {
    MJ: "%%remote bash\necho a; sleep 1; echo b",
    PX: _PIPE.format(argv=["bash", "-c", "echo a; sleep 1; echo b"]),
}
FLOOD = {MJ: "%%remote bash\nseq 1000000", PX: _PIPE.format(argv=["seq", "1000000"])}
# Each engine's own floor: a bare round trip to both workers and back, no command. For
# Monarch, the warm actors' ``ping`` endpoint called on the session's loop (what any
# %%remote run pays to reach the workers and hear back); for ipyparallel, ``%px pass``.
# Defined after the first warm run, so the actors exist.
ENGINE_FLOOR_SETUP = (
    "_mj_remote = get_ipython().magics_manager.registry['RemoteMagics']\n"
    "_mj_actors = next(iter(_mj_remote.runner._warm.values())).actors\n"
    "async def _mj_ping():\n"
    "    await _mj_actors.ping.call()\n"
)
ENGINE_FLOOR = {MJ: "_mj_remote.session.loop.run(_mj_ping())", PX: "%px pass"}
FIRST_A = re.compile(r"(^|\s)a$", re.M)


def ok(kernel: Kernel, code: str, timeout: float = 300):
    result = kernel.execute(code, timeout)
    if result.error:
        raise RuntimeError(f"{code[:60]!r} failed: {result.error['ename']}: {result.error['evalue']}")
    return result


def first_line_time(result) -> float:
    """Arrival of the first output showing line ``a`` (%%px --stream shows its
    output as display_data updates, %%remote as stream messages)."""
    for out in result.outputs:
        if out.msg_type == "stream":
            text = out.content["text"]
        elif out.msg_type in ("display_data", "update_display_data"):
            text = out.content["data"].get("text/plain", "")
        else:
            continue
        if FIRST_A.search(text):
            return out.t
    raise RuntimeError(f"no line 'a' in the output: {result.text[:300]!r}")


def summary(values: list[float]) -> dict:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    p90 = statistics.quantiles(values, n=10)[8] if len(values) > 1 else values[0]
    return {"median": statistics.median(values), "q1": q[0], "q3": q[2], "p90": p90, "n": len(values)}


IPP_VENV = Path.home() / ".cache" / "monarch_jupyter" / "bench-ipyparallel"
IPP_REQUIREMENT = "ipyparallel==9.*"


def ipp_venv(folder: Path) -> Path:
    """The python of a virtualenv holding ipyparallel (and its ipykernel), made if missing."""
    python = folder / "bin" / "python"
    check = [str(python), "-c", "import ipyparallel, ipykernel"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    print(f"making ipyparallel's venv in {folder} (pip install {IPP_REQUIREMENT})", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", IPP_REQUIREMENT],
        check=True,
    )
    subprocess.run(check, check=True)
    return python


def venv_versions(python: Path) -> str:
    code = (
        "from importlib import metadata as m\n"
        "print(', '.join(f'{d} {m.version(d)}' for d in ('ipyparallel', 'ipykernel', 'pyzmq')))"
    )
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True).stdout.strip()


def ipp_kernelspec(folder: Path, python: Path) -> str:
    """A kernelspec running ``python`` (the venv's) under ``folder``, on ``JUPYTER_PATH``."""
    spec = folder / "kernels" / "bench-ipp"
    spec.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "ipp", "language": "python"}))
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(folder), os.environ.get("JUPYTER_PATH")]))
    return "bench-ipp"


class Side:
    """One kernel and how to bring it back after a restart."""

    def __init__(self, name: str, kernel: Kernel, setup: list[str]) -> None:
        self.name, self.kernel, self.setup = name, kernel, setup

    def restart(self) -> None:
        self.kernel.km.restart_kernel(now=True)
        self.kernel.kc.wait_for_ready(timeout=60)


_CLUSTER = """
import sys, ipyparallel as ipp
cluster = ipp.Cluster(n={n}, profile_dir={profile!r}, cluster_id="bench", controller_ip="127.0.0.1",
                      log_level=30)
cluster.start_cluster_sync()
print("ready", flush=True)
sys.stdin.read()  # until the benchmark closes it
cluster.stop_cluster_sync()
"""


def start_cluster(folder: Path, python: Path):
    """An ipyparallel controller and 2 engines on loopback, run by ``python`` (the venv's);
    returns (the process holding the cluster, client file). Closing its stdin stops it."""
    code = _CLUSTER.format(n=ENGINES, profile=str(folder / "profile"))
    holder = subprocess.Popen(
        [str(python), "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    line = holder.stdout.readline()
    if line.strip() != "ready":
        holder.kill()
        raise RuntimeError(f"the ipyparallel cluster did not start (exit {holder.wait()})")
    return holder, folder / "profile" / "security" / "ipcontroller-bench-client.json"


def non_loopback_listeners(pids: list[int]) -> list[str]:
    """TCP sockets in LISTEN state owned by ``pids`` and bound beyond loopback."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = []
    for table, loopback in (("tcp", ("0100007F",)), ("tcp6", ("00000000000000000000000001000000",))):
        try:
            rows = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            address, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes and address.split(":")[0] not in loopback:
                found.append(f"{table} {address}")
    return found


def machine() -> str:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = []
    for dist in ("torchmonarch", "ipykernel", "jupyter_client"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions.append(f"{dist} {metadata.version(dist)}")
    if _IPP_VERSIONS:
        versions.append(f"ipyparallel's venv: {_IPP_VERSIONS[0]}")
    return (
        f"{os.cpu_count()} CPUs ({model}), Linux {platform.release()}, Python {platform.python_version()}; "
        + ", ".join(versions)
    )


_IPP_VERSIONS: list[str] = []


def add_gap(parser: argparse.ArgumentParser) -> None:
    """``--gap S``: seconds to wait after each cell, as between a user's cells."""
    parser.add_argument(
        "--gap", type=float, default=0.0, help="seconds to wait after each cell (default 0: back to back)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60, help="repetitions of the fast measures (default 60)")
    add_gap(parser)
    parser.add_argument(
        "--n-slow",
        type=int,
        default=None,
        help="repetitions of the flood and restart measures (default min(n, 10))",
    )
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--ipp-venv",
        type=Path,
        default=IPP_VENV,
        help=f"ipyparallel's virtualenv, made if missing ({IPP_VENV})",
    )
    opts = parser.parse_args()
    ipp_python = ipp_venv(opts.ipp_venv)
    _IPP_VERSIONS.append(venv_versions(ipp_python))
    n, n_slow = opts.n, opts.n_slow or min(opts.n, 10)

    folder = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    tag = new_tag()
    # The cluster's processes inherit this environment, so the tag finds them
    # all; IPYTHONDIR keeps profiles and history out of the home folder.
    os.environ[TAG_VAR] = tag
    os.environ["IPYTHONDIR"] = str(folder / "ipython")
    (folder / "mj").mkdir()
    (folder / "px").mkdir()
    figures: dict[str, dict[str, dict]] = {}
    cluster = None
    kernels: list[Kernel] = []
    load_before = os.getloadavg()
    try:
        print("starting: ipyparallel cluster on 127.0.0.1, two kernels, a local Monarch job", flush=True)
        cluster, client_file = start_cluster(folder / "px", ipp_python)
        ipp_kernel = ipp_kernelspec(folder / "jupyter", ipp_python)
        connect = (
            "import ipyparallel as _ipp\n"
            f"_rc = _ipp.Client({str(client_file)!r})\n"
            f"_rc.wait_for_engines({ENGINES}, timeout=60)\n"
            "_rc.activate()"
        )
        mj = Side(MJ, Kernel(folder / "mj", tag), ["%load_ext monarch_jupyter"])
        kernels.append(mj.kernel)
        px = Side(PX, Kernel(folder / "px", tag, kernel_name=ipp_kernel), [connect])
        kernels.append(px.kernel)
        for side in (mj, px):
            for code in side.setup:
                ok(side.kernel, code, 120)
        ok(mj.kernel, "%job apply --local hosts=2", 300)
        ok(px.kernel, "%px import os, sys, subprocess")
        pids = tagged_pids(tag)
        print(f"  processes tagged for reaping: {len(pids)}", flush=True)
        exposed = non_loopback_listeners(pids)
        if exposed:
            raise RuntimeError(f"a process started here listens beyond loopback: {exposed}")

        def alternate(
            label: str,
            codes: dict[str, str],
            count: int,
            measure=lambda r: r.duration,
            warmup: int = 5,
            timeout: float = 300,
        ) -> None:
            for side in (mj, px):
                for _ in range(warmup):
                    ok(side.kernel, codes[side.name], timeout)
            values: dict[str, list[float]] = {MJ: [], PX: []}
            for i in range(count):
                for side in (mj, px) if i % 2 == 0 else (px, mj):
                    values[side.name].append(measure(ok(side.kernel, codes[side.name], timeout)))
                    time.sleep(opts.gap)
            figures[label] = {name: summary(v) for name, v in values.items()}
            print(
                f"  {label}: " + ", ".join(f"{k} {figures[label][k]['median'] * 1e3:.1f} ms" for k in values),
                flush=True,
            )

        alternate("empty cell", {MJ: "pass", PX: "pass"}, n)
        alternate("warm true", WARM, n)
        # a session cell (each rank's namespace kept): ipyparallel's engines keep theirs too
        alternate("warm session x = 1", {MJ: "%%remote python --session\nx = 1", PX: "%px x = 1"}, n)
        ok(mj.kernel, ENGINE_FLOOR_SETUP)
        alternate("engine floor", ENGINE_FLOOR, n)
        alternate("first remote line", FIRST_LINE, n, measure=first_line_time, warmup=1)
        alternate("seq 1000000 on 2 ranks, shown live", FLOOD, n_slow, warmup=1, timeout=600)

        # After a restart: the prompt back after loading / reconnecting, then the
        # first remote command (it waits for the attach and the actors).
        first_use = {MJ: "%%remote bash\ntrue", PX: "%%px\nsubprocess.run(['true'])"}

        load: dict[str, list[float]] = {MJ: [], PX: []}
        ready: dict[str, list[float]] = {MJ: [], PX: []}
        for i in range(n_slow):
            for side in (mj, px) if i % 2 == 0 else (px, mj):
                side.restart()
                loaded = ok(side.kernel, side.setup[0], 120)
                used = ok(side.kernel, first_use[side.name], 120)
                load[side.name].append(loaded.duration)
                ready[side.name].append(loaded.duration + used.duration)
        figures["load after restart"] = {k: summary(v) for k, v in load.items()}
        figures["load + first command after restart"] = {k: summary(v) for k, v in ready.items()}
        ok(mj.kernel, "%job kill", 120)
    finally:
        for kernel in kernels:
            with contextlib.suppress(Exception):
                kernel.shutdown()
        if cluster is not None:
            with contextlib.suppress(Exception):
                assert cluster.stdin is not None
                cluster.stdin.close()
                cluster.wait(30)
        reap(tag)
        shutil.rmtree(folder, ignore_errors=True)
        left = tagged_pids(tag)
        if left:
            print(f"WARNING: processes still alive after reaping: {left}", file=sys.stderr)

    report(figures, n, n_slow, load_before, os.getloadavg(), opts.gap)
    if opts.json:
        Path(opts.json).write_text(
            json.dumps({"n": n, "n_slow": n_slow, "machine": machine(), "figures": figures}, indent=1)
        )


def report(figures: dict, n: int, n_slow: int, load_before, load_after, gap: float = 0.0) -> None:
    def cell(s: dict) -> str:
        m, p90 = s["median"], s["p90"]
        if m >= 1:
            return f"{m:.2f} s (p90 {p90:.2f})"
        return f"{m * 1e3:.1f} ms (p90 {p90 * 1e3:.1f})"

    def ratio(px: dict, mj: dict) -> str:
        r = px["median"] / mj["median"]
        return f"{r:.2f}× faster" if r >= 1 else f"{1 / r:.2f}× slower"

    def above_floor(key: str, side: str) -> str:
        if key in ("empty cell", "engine floor") or "engine floor" not in figures or key not in FLOORED:
            return ""
        return f"floor + {(figures[key][side]['median'] - figures['engine floor'][side]['median']) * 1e3:.1f}"

    rows = [
        ("empty cell", "empty cell"),
        (
            "engine floor",
            "engine floor: a bare round trip to both workers (Monarch `ping.call()` on the warm actors; `%px pass`)",
        ),
        ("warm true", "warm remote `true` (ipyparallel: `subprocess.run(['true'])`)"),
        ("warm session x = 1", "warm session cell `x = 1` (`%%remote python --session`; `%px x = 1`)"),
        (
            "first remote line",
            "first remote line on IOPub (`echo a; sleep 1; echo b`; "
            "ipyparallel `--stream` reading the child's pipe)",
        ),
        ("seq 1000000 on 2 ranks, shown live", "`seq 1000000` on 2 ranks, shown live"),
        (
            "load after restart",
            "after a restart: `%load_ext monarch_jupyter` (ipyparallel: `Client(file).activate()`)",
        ),
        (
            "load + first command after restart",
            "after a restart: load + first remote `true` (`%%remote bash true` / `%%px subprocess.run`)",
        ),
    ]
    print()
    print(f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"Machine: {machine()}")
    print(
        f"Load average before/after: {load_before[0]:.2f} / {load_after[0]:.2f}; "
        f"medians (90th percentile) of {n} (flood and restart: {n_slow}), "
        "client round trip execute request → idle, "
        + (f"{gap * 1e3:.0f} ms between cells" if gap else "cells back to back")
    )
    print()
    print("| measure | ipyparallel `%%px` | `%%remote` | ratio | `%%remote` above its floor |")
    print("|---|---|---|---|---|")
    for key, label in rows:
        if key not in figures:
            continue
        f = figures[key]
        shown = "–" if key in ("empty cell", "engine floor") else ratio(f[PX], f[MJ])  # floors, not contests
        print(f"| {label} | {cell(f[PX])} | {cell(f[MJ])} | {shown} | {above_floor(key, MJ)} |")
    if "warm true" in figures and "empty cell" in figures:
        warm, empty = figures["warm true"][MJ]["median"], figures["empty cell"][MJ]["median"]
        print(f"\nwarm `%%remote bash true` / empty cell in the same kernel: {warm / empty:.2f}×")


#: rows whose distance to the engine's floor is shown (the issue's goals are put that way)
FLOORED = ("warm true", "warm session x = 1", "first remote line")


if __name__ == "__main__":
    main()
