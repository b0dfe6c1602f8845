"""Cost of one live-topology sample (the `%job` widget's refresh, `%job topology`).

    python benchmarks/bench_topology.py [--procs 64] [--actors 2] [--repeat 20] [--real]

Simulated: a loopback HTTP server answers the mesh admin's ``/v1/{ref}`` for N procs (over two
hosts, each with ``--actors`` user actors and Monarch's 6 system actors) with node JSON of the
shape the real admin returns; one sample is ``services.admin.sample`` (every host and proc, the
user actors, side by side) plus the widget's ``to_data`` and its JSON. ``--real`` also samples a
real ``--admin`` job of 2 hosts with one user proc each (64 real procs do not fit this machine).
Prints medians in ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from monarch_jupyter.jobs.services import admin, topology

SYSTEM = ("setup", "logger", "cast", "proc_agent", "spawner", "log_forwarder")
NOW = "2026-12-02T01:52:40.000Z"


def fleet(procs: int, actors: int) -> dict[str, dict]:
    """Node JSON by ref, as the admin answers it."""
    nodes: dict[str, dict] = {}
    hosts = [f"host:h{h}" for h in range(2)]
    nodes["root"] = {"identity": "root", "children": hosts}
    for h, host in enumerate(hosts):
        mine = [f"p{p}@h{h}" for p in range(procs) if p % 2 == h]
        nodes[host] = {
            "identity": host,
            "properties": {
                "Host": {"addr": f"unix:/tmp/hosts_{h}", "memory": {"process_rss_bytes": 1 << 27}}
            },
            "children": mine,
        }
        for proc in mine:
            system = [f"{name}.{proc}" for name in SYSTEM]
            user = [f"worker{a}<x>.{proc}" for a in range(actors)]
            nodes[proc] = {
                "identity": proc,
                "properties": {
                    "Proc": {
                        "proc_name": proc.split("@")[0],
                        "system_children": system,
                        "debug": {
                            "memory": {"process_rss_bytes": 1 << 28},
                            "actor_work_queue_depth_total": 0,
                        },
                    }
                },
                "children": user + system,
                "as_of": NOW,
            }
            for ref in user + system:
                nodes[ref] = {
                    "identity": ref,
                    "as_of": NOW,
                    "properties": {
                        "Actor": {
                            "actor_status": "idle",
                            "messages_processed": 12,
                            "queue_depth": 0,
                            "is_system": ref in system,
                            "execution": {"active_count": 0, "active_handlers": []},
                        }
                    },
                }
    return nodes


def serve(nodes: dict[str, dict]) -> ThreadingHTTPServer:
    bodies = {ref: json.dumps(node).encode() for ref, node in nodes.items()}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ref = urllib.parse.unquote(self.path.removeprefix("/v1/"))
            body = bodies.get(ref)
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def simulated(procs: int, actors: int, repeat: int) -> dict[str, float]:
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(fleet(procs, actors), file)
    # the admin is another process (as the real one is the kernel's Rust threads, not its GIL)
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", file.name], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    urls: dict[str, str | None] = {"admin": f"http://127.0.0.1:{server.stdout.readline().strip()}"}
    samples, builds, sizes = [], [], []
    previous = None
    try:
        for _ in range(repeat):
            began = time.perf_counter()
            previous = admin.sample(urls, previous)
            data = json.dumps(topology.to_data(previous))
            samples.append((time.perf_counter() - began) * 1000)
            sizes.append(len(data))
        found = admin.rows(urls["admin"] or "")
        for _ in range(repeat):
            began = time.perf_counter()
            json.dumps(topology.to_data(topology.build(found, previous)))
            topology.text(previous)
            builds.append((time.perf_counter() - began) * 1000)
    finally:
        server.kill()
        server.wait()
        Path(file.name).unlink()
    return {
        "requests": 1 + 2 + procs + procs * actors,
        "sample_ms": statistics.median(samples),
        "build_ms": statistics.median(builds),
        "state_bytes": statistics.median(sizes),
    }


def real(repeat: int) -> float:
    import tempfile

    from harness import job_kernel

    setup = (
        "import time, monarch_jupyter\n"
        "from monarch.actor import Actor, endpoint\n"
        "from monarch_jupyter.jobs.services import admin\n"
        "class W(Actor):\n"
        "    @endpoint\n"
        "    def f(self) -> int:\n"
        "        return 1\n"
        "procs = monarch_jupyter.state().hosts.spawn_procs(per_host={'gpus': 1})\n"
        "w = procs.spawn('w', W)\n"
        "w.f.call().get()\n"
        "urls = monarch_jupyter.current_session().status().urls\n"
        "admin.sample(urls)\n"
    )
    code = (
        "import statistics\n_t = []\n"
        f"for _ in range({repeat}):\n"
        "    _b = time.perf_counter(); admin.sample(urls); _t.append((time.perf_counter() - _b) * 1000)\n"
        "print('MEDIAN', statistics.median(_t))"
    )
    with (
        tempfile.TemporaryDirectory() as folder,
        job_kernel(Path(folder) / "nb", "hosts=2 --admin", setup) as k,
    ):
        return float(k.ok(code, timeout=600).text.split("MEDIAN", 1)[1].split()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=64)
    parser.add_argument("--actors", type=int, default=2, help="user actors per proc")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--real", action="store_true", help="also a real 2-host --admin job")
    parser.add_argument("--serve", metavar="FILE", help=argparse.SUPPRESS)  # the simulated admin
    args = parser.parse_args()
    if args.serve:
        server = serve(json.loads(Path(args.serve).read_text()))
        print(server.server_address[1], flush=True)
        threading.Event().wait()
    sim = simulated(args.procs, args.actors, args.repeat)
    print(
        f"simulated admin, {args.procs} procs × {args.actors} user actors ({sim['requests']} requests): "
        f"sample + widget state {sim['sample_ms']:.1f} ms median; build + data + text alone "
        f"{sim['build_ms']:.2f} ms; widget state {sim['state_bytes'] / 1024:.1f} KB"
    )
    if args.real:
        print(
            f"real admin, 2 hosts (+ the kernel's), 1 user proc each: sample {real(args.repeat):.1f} ms median"
        )


if __name__ == "__main__":
    main()
