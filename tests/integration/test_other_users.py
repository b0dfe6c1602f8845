"""#42: nobody else on the machine gets in. Each case with a real second Unix user (created and
removed by the fixture), real kernels and real workers."""

from __future__ import annotations

import os
import re

import pytest

pytestmark = pytest.mark.kernel

#: Run as the other user: POST SQL to a URL, print the HTTP status (or the failure) and the body.
POST_SQL = r"""
import json, sys, urllib.request, urllib.error
url, sql = sys.argv[1], sys.argv[2]
req = urllib.request.Request(url, data=json.dumps({"sql": sql}).encode(),
                             headers={"Content-Type": "application/json"}, method="POST")
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    with opener.open(req, timeout=10) as r:
        print("STATUS", r.status); print(r.read(2000).decode("utf-8", "replace"))
except urllib.error.HTTPError as e:
    print("STATUS", e.code); print(e.read(2000).decode("utf-8", "replace"))
except Exception as e:
    print("FAILED", type(e).__name__, e)
"""


def urls(kernel) -> dict[str, str]:
    text = kernel.ok("%job").text
    return dict(re.findall(r"^\s+(telemetry|admin|dashboard)\s+(\S+)$", text, re.M))


def as_other(user, url: str, sql: str) -> str:
    done = user.run("/usr/bin/python3", "-I", "-c", POST_SQL, url, sql, timeout=30)
    return done.stdout + done.stderr


def test_the_telemetry_store_answers_only_its_user(start_kernel, second_user, tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("a,b\nours,1\n")
    secret.chmod(0o600)
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("import os; os.umask(0)")  # the sidecar starts from the kernel: its umask is inherited
    k.ok("%job apply --local hosts=1 --telemetry")
    found = urls(k)
    telemetry = found["telemetry"]
    # another user: refused with one line, nothing read, nothing written
    for sql in (
        "SELECT * FROM actors LIMIT 5",
        f"CREATE EXTERNAL TABLE stolen STORED AS CSV LOCATION '{secret}' OPTIONS ('format.has_header' 'true')",
        "COPY (SELECT 1 AS x) TO '/tmp/mj42-written.csv'",
    ):
        out = as_other(second_user, f"{telemetry}/api/query", sql)
        assert "STATUS 403" in out and "answers only the user who started the job" in out, out
        assert "ours" not in out, out
    assert not os.path.exists("/tmp/mj42-written.csv")
    # the dashboard server of the same sidecar, too
    if "dashboard" in found:
        out = as_other(second_user, f"{found['dashboard']}/api/query", "SELECT 1")
        assert "STATUS 403" in out, out
    # the user still queries it
    assert re.search(r"\b1\b", k.ok("%job query SELECT count(*) AS n FROM actors").text)
    # Monarch 0.7's mesh admin (Rust, in the kernel) has no peer check and relays SQL to the
    # store as us: the store refuses what it relays
    out = as_other(second_user, f"{found['admin']}/v1/query", f"SELECT * FROM stolen_{0}")
    assert "relay is refused" in out and '"rows"' not in out, out
    assert "one" in k.ok("%job query SELECT 1 AS one").text  # the user's own SQL still answers
    shown = k.ok("%job").text
    assert (
        "telemetry and dashboard: you only" in shown and "mesh admin (tree, py-spy): any local user" in shown
    )
    # the sidecar's control socket (Monarch's, in /tmp): ours alone even under umask 000
    from harness import tagged_pids
    from monarch_jupyter.system import procfs

    sidecars = [p for p in tagged_pids(k.tag) if "_sidecar_main" in " ".join(procfs.cmdline(p) or [])]
    assert sidecars, "the job's sidecar"
    socket_path = (procfs.cmdline(sidecars[0]) or [])[-2]
    assert os.stat(socket_path).st_mode & 0o077 == 0, oct(os.stat(socket_path).st_mode)
    k.ok("%job kill")
