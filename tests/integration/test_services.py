"""Monarch's job services from a notebook: telemetry and admin kept by the spec, loopback only,
and a telemetry sidecar that outlives a kernel restart. Real kernels, real workers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness import job_kernel, poll, tagged_pids
from monarch_jupyter.system import procfs as _procfs

pytestmark = pytest.mark.kernel

LOOPBACK = ("127.0.0.1", "::1")


@pytest.fixture(scope="module")
def tkernel(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("services") / "nb", "hosts=2 --telemetry") as kernel:
        yield kernel


def urls(kernel) -> dict[str, str]:
    text = kernel.ok("%job").text
    return dict(re.findall(r"^\s+(telemetry|admin|dashboard)\s+(\S+)$", text, re.M))


def test_spec_keeps_the_services(tkernel):
    assert (
        tkernel.cwd / ".monarch/default/spec"
    ).read_text() == "monarch_jupyter.local_jobs.hosts_2__telemetry"
    status = tkernel.ok("%job").text
    assert re.search(r"^\s+services\s+telemetry, admin$", status, re.M), status
    found = urls(tkernel)
    assert found["telemetry"].startswith("http://127.0.0.1:"), status
    assert found["admin"].startswith("http://localhost:"), status
    # the CLI's import path builds the same job
    built = tkernel.ok(
        "from monarch_jupyter import local_jobs\nfrom monarch_jupyter.jobs import services\n"
        "print('SERVICES', services.configured(local_jobs.hosts_2__telemetry))"
    ).text
    assert "SERVICES ('telemetry', 'admin')" in built


def test_a_configured_variable_job_is_saved_with_its_services(tkernel):
    tkernel.ok("from monarch.job import ProcessJob\nvjob = ProcessJob({'hosts': 2}).enable_telemetry()")
    applied = tkernel.ok("%job apply vjob")
    assert "lives only in this kernel" not in applied.text, applied.text
    assert (
        tkernel.cwd / ".monarch/default/spec"
    ).read_text() == "monarch_jupyter.local_jobs.hosts_2__telemetry"
    unsaid = tkernel.ok(
        "from monarch_jupyter.jobs.resolve import saved_path_for\n"
        "print('SAVED', saved_path_for(ProcessJob({'hosts': 2}).enable_telemetry(retention_secs=5)))"
    ).text
    assert "SAVED None" in unsaid  # a config a spec cannot say: the job stays kernel-only
    assert "changed" not in tkernel.ok("%job apply").text  # the bare apply: the same job, reused


def test_a_second_admin_job_in_one_kernel_says_why_not(tkernel):
    before = urls(tkernel)
    refused = tkernel.execute("%job apply --local hosts=1 --telemetry")
    text = refused.text.strip()
    assert len(text.splitlines()) == 1 and "Traceback" not in text, text
    assert "starts one per process: %job kill, restart the kernel" in text
    assert urls(tkernel) == before  # the running job is untouched


def test_no_service_listens_beyond_loopback(tkernel):
    pids = tagged_pids(tkernel.tag)
    listening = {pid: _procfs.listening_tcp(pid) for pid in pids}
    everything = [(pid, addr, port) for pid, socks in listening.items() for addr, port in socks]
    assert [s for s in everything if s[1] not in LOOPBACK] == [], everything
    ports = {port for _, _, port in everything}
    found = urls(tkernel)
    for key in ("telemetry", "admin"):
        assert int(found[key].rsplit(":", 1)[1]) in ports, (key, found, everything)


def test_sidecar_in_its_own_session(tkernel):
    sidecars = [p for p in tagged_pids(tkernel.tag) if "_sidecar_main" in " ".join(_procfs.cmdline(p) or [])]
    assert len(sidecars) == 1
    kernel_pid = tkernel.km.provisioner.pid
    assert _procfs.pgid(sidecars[0]) != _procfs.pgid(kernel_pid)


def sql_rows(url: str, sql: str) -> list[dict]:
    import json
    import urllib.request

    request = urllib.request.Request(
        f"{url}/api/query",
        data=json.dumps({"sql": sql}).encode(),
        headers={"Content-Type": "application/json"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as response:
        return json.loads(response.read())["rows"]


def sidecar_of(tag: str) -> list[int]:
    return [p for p in tagged_pids(tag) if "_sidecar_main" in " ".join(_procfs.cmdline(p) or [])]


def listeners(tag: str) -> list[tuple[int, str, int]]:
    return [(pid, addr, port) for pid in tagged_pids(tag) for addr, port in _procfs.listening_tcp(pid)]


def test_dashboard_job_quiet_loopback_survives_restart_and_kill(start_kernel, tag, workdir):
    kernel = start_kernel()
    kernel.ok("%load_ext monarch_jupyter")
    kernel.ok(
        "from monarch.job import ProcessJob\n"
        "djob = ProcessJob({'hosts': 1}).enable_telemetry(include_dashboard=True, dashboard_port=0)"
    )
    applied = kernel.ok("%job apply djob")
    # quiet: the admin and dashboard banners are in the apply log, not the cell
    assert "Mesh admin server" not in applied.text and "Monarch Dashboard" not in applied.text, applied.text
    logs = "".join(p.read_text() for p in (workdir / ".monarch/default").glob("apply-*.log"))
    assert "Mesh admin server listening on" in logs and "Monarch Dashboard: " in logs, logs
    before = urls(kernel)
    assert {"telemetry", "admin", "dashboard"} <= set(before), before
    # loopback only, the dashboard included (Monarch's own binds "::")
    bound = listeners(tag)
    assert [b for b in bound if b[1] not in LOOPBACK] == [], bound
    assert int(before["dashboard"].rsplit(":", 1)[1]) in {port for _, _, port in bound}
    rows = sql_rows(before["telemetry"], "SELECT count(*) AS n FROM actors")[0]["n"]
    assert rows > 0
    (sidecar,) = sidecar_of(tag)

    # lifetime: a kernel restart keeps the sidecar, its URL and its rows
    kernel.restart()
    kernel.ok("%load_ext monarch_jupyter")
    after = urls(kernel)
    assert after["telemetry"] == before["telemetry"], (before, after)
    assert sidecar_of(tag) == [sidecar]
    assert sql_rows(after["telemetry"], "SELECT count(*) AS n FROM actors")[0]["n"] >= rows

    # %job kill stops the sidecar and frees its ports (the admin's stays: Monarch 0.7 cannot stop it)
    # and removes the lock record and log Monarch's sidecar leaves in /tmp
    apply_id = kernel.ok(
        "import monarch_jupyter as _mj; print(_mj.current_session().status().apply_id)"
    ).stream()
    lock = Path(f"/tmp/monarch_job_sidecar_{apply_id.strip()}.lock")
    assert lock.exists() and lock.with_suffix(".log").exists(), lock
    killed = kernel.ok("%job kill").text
    assert not lock.exists() and not lock.with_suffix(".log").exists(), lock
    assert "the mesh admin's loopback port stays open in this kernel until it restarts" in killed, killed
    assert poll(lambda: not sidecar_of(tag), timeout=15), sidecar_of(tag)
    ports = {int(after[key].rsplit(":", 1)[1]) for key in ("telemetry", "dashboard")}
    assert poll(lambda: not ports & {port for _, _, port in listeners(tag)}, timeout=15), listeners(tag)


def test_query_returns_an_arrow_table_with_order_and_types(tkernel):
    out = tkernel.ok(
        "t = %job query SELECT 1 AS zeta, 'x' AS alpha, 2.5 AS mid FROM actors LIMIT 3\n"
        "print('TYPE', type(t).__module__, type(t).__name__, t.column_names, [str(f.type) for f in t.schema], t.num_rows)"
    ).text
    assert "TYPE pyarrow.lib Table ['zeta', 'alpha', 'mid'] ['int64', 'string', 'double'] 3" in out, out


def test_query_shows_a_bounded_table_with_count_and_time(tkernel):
    shown = tkernel.ok("%job query SELECT * FROM actors")
    (result,) = [o for o in shown.outputs if o.msg_type == "execute_result"]
    html = result.content["data"]["text/html"]
    assert "<table>" in html and re.search(r"\d+ rows? .*· [\d.]+ ms", html), html
    assert html.count("<tr>") <= 51
    assert re.search(r"\(\d+ rows?.*ms\)", result.content["data"]["text/plain"])


def test_query_tables_and_errors_in_one_line(tkernel):
    tables = tkernel.ok("%job query --tables").text
    assert re.search(r"^actors: .*\w+ \w+", tables, re.M), tables
    bad = tkernel.execute("%job query SELEC nonsense")
    text = bad.text.strip()
    assert len(text.splitlines()) == 1 and "Traceback" not in text, text
    assert text.startswith("UsageError: %job query: SQL error:"), text
    missing = tkernel.execute("%job query")
    assert "give the SQL" in missing.text and len(missing.text.strip().splitlines()) == 1


def test_query_function_and_pandas(tkernel):
    out = tkernel.ok(
        "import monarch_jupyter\n"
        "t = monarch_jupyter.query('SELECT count(*) AS n FROM actors')\n"
        "print('N', t.column_names, t.num_rows)"
    ).text
    assert "N ['n'] 1" in out
    try:
        import pandas  # noqa: F401
    except ImportError:
        text = tkernel.execute("%job query --pandas SELECT 1 AS a").text.strip()
        assert "--pandas needs pandas: pip install pandas" in text and len(text.splitlines()) == 1
    else:
        out = tkernel.ok("df = %job query --pandas SELECT 1 AS a\nprint('DF', type(df).__name__)").text
        assert "DF DataFrame" in out


def test_profile_runs_in_the_background_and_writes_a_trace(tkernel):
    folder = tkernel.cwd / ".monarch/default"
    before = set(folder.glob("profile-*.pftrace"))
    started = tkernel.ok("%job profile --seconds 2")
    assert started.duration < 1.5, started.duration  # the window runs on the owned loop
    assert "profiling the job for 2 s" in started.text and ".pftrace" in started.text
    meanwhile = tkernel.ok("%%remote\necho during")  # the kernel is free: this runs inside the window
    assert "during" in meanwhile.text
    new = poll(lambda: [p for p in set(folder.glob("profile-*.pftrace")) - before if p.stat().st_size], 20)
    assert new, list(folder.iterdir())
    summary = tkernel.ok(
        "import threading, monarch_jupyter\n"
        "from monarch_jupyter.jobs.services import profile as _pf\n"
        "_ev = threading.Event(); _got = []\n"
        "_pf.start(monarch_jupyter.current_session(), 1, lambda r: (_got.append(r), _ev.set()))\n"
        "monarch_jupyter.query('SELECT 1 AS x')\n"
        "_ev.wait(20)\n"
        "print(_got[0].text())"
    ).text
    assert "(Wrote " in summary  # the exporter's own line, kept out of the cells
    assert "profile of 1 s written to" in summary and "messages" in summary and "spans" in summary, summary
    bad = tkernel.execute("%job profile --seconds 0").text.strip()
    assert bad.startswith("UsageError: %job profile: --seconds must be in") and len(bad.splitlines()) == 1


def test_the_cli_applies_the_saved_spec_with_its_services(start_kernel, tag, workdir):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from harness import TAG_VAR

    cli = str(Path(sys.executable).with_name("monarch"))
    done = subprocess.run(
        [cli, "apply", "monarch_jupyter.local_jobs.hosts_1__telemetry"],
        cwd=workdir,
        env={**os.environ, TAG_VAR: tag},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    kernel = start_kernel()
    kernel.ok("%load_ext monarch_jupyter")
    kernel.ok("%job trust")  # the CLI's cache is not signed by a kernel: one deliberate step
    status = kernel.ok("%job").text
    assert re.search(r"^\s+services\s+telemetry, admin$", status, re.M), status
    assert (
        "N ['n'] 1"
        in kernel.ok(
            "t = %job query SELECT count(*) AS n FROM actors\nprint('N', t.column_names, t.num_rows)"
        ).text
    )
    assert [b for b in listeners(tag) if b[1] not in LOOPBACK] == []
    kernel.ok("%job kill")


def test_query_completes_table_names(tkernel):
    code = "%job query SELECT * FROM act"
    msg_id = tkernel.kc.complete(code, len(code))
    reply = None
    for _ in range(50):
        msg = tkernel.kc.get_shell_msg(timeout=10)
        if msg["parent_header"].get("msg_id") == msg_id:
            reply = msg["content"]
            break
    assert reply is not None and reply["status"] == "ok"
    assert "actors" in reply["matches"] and "actor_nodes" in reply["matches"], reply["matches"]
