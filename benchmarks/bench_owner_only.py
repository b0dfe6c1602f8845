"""#42: what keeping the job's services to their user costs, and what a refused query keeps.

1. A request to a werkzeug server like the sidecar's (Monarch's dashboard app is werkzeug's
   ``make_server``) before and after ``_sidecar_main.guard_servers()``: the peer's uid is looked
   up in /proc/net/tcp on every connection. Median and p90 of ``--n`` GETs, one connection each.
2. Refused answers (over the bound, no Content-Length) through ``local_http.fetch``, the errors
   kept as IPython keeps the last one: the kernel's RSS growth after ``--refusals`` of them.

    PYTHONPATH=$PWD python benchmarks/bench_owner_only.py [--n 300] [--mib 256] [--refusals 3]

Import another tree's ``monarch_jupyter`` (PYTHONPATH) to compare a before.
"""

from __future__ import annotations

import argparse
import gc
import http.server
import statistics
import threading
import time
import urllib.request


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def time_gets(url: str, n: int) -> tuple[float, float]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    took = []
    for _ in range(n):
        started = time.perf_counter()
        with opener.open(url, timeout=10) as response:
            response.read()
        took.append((time.perf_counter() - started) * 1000)
    took.sort()
    return statistics.median(took), took[int(len(took) * 0.9)]


def serve(app_server) -> str:
    threading.Thread(target=app_server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{app_server.server_port}/health"


def owner_check(n: int) -> None:
    import logging

    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    plain = make_server("127.0.0.1", 0, app, threaded=True)
    before = time_gets(serve(plain), n)
    plain.shutdown()
    try:
        from monarch_jupyter.jobs.services import _sidecar_main
    except ImportError:
        print("owner check: this tree has no _sidecar_main")
        return
    if not hasattr(_sidecar_main, "guard_servers"):
        print(
            f"GET, unguarded server     median {before[0]:.2f} ms  p90 {before[1]:.2f} ms (this tree has no guard)"
        )
        return
    _sidecar_main.guard_servers()
    guarded = make_server("127.0.0.1", 0, app, threaded=True)
    after = time_gets(serve(guarded), n)
    guarded.shutdown()
    lines = 0
    for name in ("tcp", "tcp6"):
        with open(f"/proc/net/{name}") as table:
            lines += sum(1 for _ in table) - 1
    print(f"GET, unguarded server     median {before[0]:.2f} ms  p90 {before[1]:.2f} ms")
    print(
        f"GET, owner-checked server median {after[0]:.2f} ms  p90 {after[1]:.2f} ms ({lines} sockets in /proc/net/tcp*)"
    )


class _Flood(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    size = 0

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.apache.arrow.stream")
        self.end_headers()
        block = b"z" * (1 << 20)
        try:
            for _ in range(self.size >> 20):
                self.wfile.write(block)
        except OSError:
            pass

    def log_message(self, *args: object) -> None:
        pass


def refusals(mib: int, count: int) -> None:
    from monarch_jupyter.jobs.services import local_http

    _Flood.size = (mib + 16) << 20
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flood)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/"
    gc.collect()
    start = rss_mib()
    kept = []
    for _ in range(count):
        try:
            local_http.fetch(url, 30, mib << 20)
        except local_http.TooLarge as error:
            kept.append(error)
        gc.collect()
    print(f"{count} refused answers over {mib} MiB, errors kept: RSS +{rss_mib() - start:.0f} MiB")
    httpd.shutdown()
    httpd.server_close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--refusals", type=int, default=3)
    args = parser.parse_args()
    owner_check(args.n)
    refusals(args.mib, args.refusals)


if __name__ == "__main__":
    main()
