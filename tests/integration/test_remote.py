"""%%remote against a real kernel and real workers (``--local hosts=2,aux=1``).

One kernel and job are shared by the module's tests (spawning is the slow
part); tests that kill workers use their own kernel. Streaming is proven by
the arrival times of IOPub messages, interrupts by counting the processes
that carry the test's tag.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path

import pytest

from harness import RUN_MIME, job_kernel, run_payload, tagged_pids, worker_pids
from monarch_jupyter.remote.run.spool import read_log

# the module's kernel comes from its own `shared` fixture, not conftest's
pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("remote") / "nb", "hosts=2,aux=1", "%remote true") as kernel:
        yield kernel  # the actors are warm


def lines(result):
    return result.stream("stdout").splitlines()


def commands(pid_list):
    out = []
    for pid in pid_list:
        with contextlib.suppress(OSError):
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
    return out


def test_what_the_cell_printed_before_a_quick_run_shows_before_its_result(shared):
    # the result skips ipykernel's flush of empty streams (magic.display_unflushed), never a full one
    for stream in ("sys.stdout", "sys.stderr"):
        r = shared.ok(
            f"import sys\nprint('before the run', file={stream})\n%remote true\nprint('after the run')"
        )
        kinds = [
            "before"
            if "before the run" in str(o.content)
            else "after"
            if "after the run" in str(o.content)
            else o.msg_type
            for o in r.outputs
        ]
        assert kinds == ["before", "display_data", "after"], (stream, kinds)


def test_streams_lines_as_they_are_printed(shared):
    r = shared.ok("%%remote\necho first; sleep 1.2; echo second >&2")
    stamps = {o.content["text"]: o.t for o in r.outputs if o.msg_type == "stream"}
    first = next(t for text, t in stamps.items() if "first" in text)
    second = next(t for text, t in stamps.items() if "second" in text)
    assert second - first > 0.8, stamps
    text, err = r.stream("stdout"), r.stream("stderr")
    assert "[hosts=0] first" in text and "[hosts=1] first" in text
    assert "[hosts=0:err] second" in err and "[hosts=1:err] second" in err  # on the cell's stderr
    assert ":err]" not in text
    assert "aux" not in text  # default: the first mesh only
    b = run_payload(r)
    assert b["summary"]["ok"] == 2 and b["target"] == "mesh hosts (2 ranks)"
    # streamed, so the result repeats none of them (each line once): the log has them all
    assert b["streamed"] and b["ranks"][1]["lines"] == [] and b["ranks"][1]["truncated"] == 2
    log = read_log(Path(shared.cwd, b["log_path"]))
    assert log["hosts=1"] == ["first"] and log["hosts=1:err"] == ["second"]
    assert "mesh hosts (2 ranks)" in log["#"][0]


def test_a_short_run_shows_its_result_only_and_a_long_one_its_grid(shared):
    """The live grid appears once a run has lasted 0.3 s; a short run sends no
    placeholder or grid, only its lines and its result. The grid's output is static first: the
    running payload naming its model, no widget view; no view drew it here, so it is emptied
    and the result follows the last line."""
    widget = "application/vnd.jupyter.widget-view+json"
    short = shared.ok("%remote true")
    assert [o.msg_type for o in short.outputs] == ["display_data"]
    assert RUN_MIME in short.outputs[0].content["data"]
    long = shared.ok("%%remote\necho early; sleep 0.8; echo late")
    grids = [
        o
        for o in long.outputs
        if o.msg_type == "display_data" and o.content["data"].get(RUN_MIME, {}).get("state") == "running"
    ]
    assert len(grids) == 1, [o.msg_type for o in long.outputs]
    assert widget not in grids[0].content["data"] and grids[0].content["data"][RUN_MIME]["model_id"]
    emptied = [o for o in long.outputs if o.msg_type == "update_display_data"]
    assert [o.content["data"] for o in emptied] == [{"text/plain": ""}], emptied
    late = next(o.t for o in long.outputs if o.msg_type == "stream" and "late" in o.content["text"])
    assert late < long.outputs[-1].t  # the result after the last line
    assert grids[0].content["data"]["text/plain"] == "%%remote mesh hosts (2 ranks)"
    early = next(o.t for o in long.outputs if o.msg_type == "stream" and "early" in o.content["text"])
    assert early < grids[0].t  # shown where the output stood once the run had lasted
    assert RUN_MIME in long.outputs[-1].content["data"]


def test_partial_lines_progress_bars_and_utf8(shared):
    r = shared.ok(
        "%%remote python --rank 0\n"
        "import sys, time\n"
        "sys.stdout.write('loading 10%\\r'); sys.stdout.flush(); time.sleep(0.6)\n"
        "sys.stdout.write('loading 60%\\r'); sys.stdout.flush(); time.sleep(1.2)\n"
        "sys.stdout.buffer.write(b'caf\\xc3'); sys.stdout.flush(); time.sleep(0.3)\n"
        "sys.stdout.buffer.write(b'\\xa9 done\\n'); sys.stdout.flush()\n"
    )
    outs = [(o.t, o.content["text"]) for o in r.outputs if o.msg_type == "stream"]
    # a \r line is shown in place: one display, updated as the line is rewritten (issue 44)
    bars = [
        (o.t, o.content["data"].get("text/plain", ""))
        for o in r.outputs
        if o.msg_type in ("display_data", "update_display_data")
        and "display_id" in o.content.get("transient", {})
    ]
    t10 = next(t for t, text in bars if "[hosts=0] loading 10%" in text)
    t60 = next(t for t, text in bars if "[hosts=0] loading 60%" in text)
    tend = next(t for t, text in outs if "café done" in text)
    assert t10 < t60 < tend and tend - t10 > 1.5, (bars, outs)
    assert "loading" not in "".join(text for _, text in outs), outs  # never a line per rewrite
    assert "\ufffd" not in r.stream()
    assert "café done" in r.stream() and run_payload(r)["streamed"]  # the lines are the stream's


def test_per_rank_order_and_targets(shared):
    r = shared.ok("%remote --all seq 1 300")
    text = r.stream("stdout")
    for label in ("hosts=0", "hosts=1"):
        got = [int(line.split()[-1]) for line in text.splitlines() if line.startswith(f"[hosts/{label}]")]
        assert got == list(range(1, 301)), label
    assert re.search(r"^\[aux/hosts=0\] +300$", text, re.MULTILINE)
    assert run_payload(r)["target"] == "meshes hosts, aux (3 ranks)"

    r = shared.ok("%remote --point hosts=1 echo P $MONARCH_RANK_hosts")
    assert lines(r) == ["[hosts=1] P 1"]
    r = shared.ok("%remote --rank 0 echo R")
    assert lines(r) == ["[hosts=0] R"]
    r = shared.ok("%remote --mesh aux echo M $MONARCH_SIZE_hosts")
    assert lines(r) == ["[hosts=0] M 1"]
    bad = shared.execute("%remote --mesh nope true")
    assert "no mesh 'nope'" in bad.text and "hosts, aux" in bad.text
    bad = shared.execute("%remote --rank 7 true")
    assert "out of range" in bad.text


def test_per_host_env_and_python(shared):
    r = shared.ok(
        "%%remote --per-host gpu=2 python --group\n"
        "import os\n"
        "print(os.environ['MONARCH_SIZE_hosts'], os.environ['MONARCH_SIZE_gpu'])\n"
    )
    # the live fold's label; the end view is then one line (the same groups)
    assert "[hosts=0,gpu=[0-1]; hosts=1,gpu=[0-1] (4)] 2 2" in r.stream(), r.stream()
    assert "(--group: same groups as above)" in r.stream()
    r = shared.ok(
        "%remote --per-host gpu=2 --point gpu=1 -e X=a --env Y=b echo $X$Y $MONARCH_RANK_hosts$MONARCH_RANK_gpu"
    )
    assert sorted(lines(r)) == ["[hosts=0,gpu=1] ab 01", "[hosts=1,gpu=1] ab 11"]


def test_workdir_output_dir_save_and_group(shared, tmp_path):
    r = shared.ok("%remote --rank 0 pwd")
    assert lines(r) == [f"[hosts=0] {shared.cwd}"]
    r = shared.ok(f"%remote --rank 0 --workdir {tmp_path} pwd")
    assert lines(r) == [f"[hosts=0] {tmp_path}"]
    r = shared.execute(f"%remote --workdir {tmp_path}/missing pwd")
    assert r.error and "does not exist" in r.error["evalue"]

    shared.ok(f"%remote --output-dir {tmp_path}/out/$SUBDIR echo to file; echo e >&2")
    assert (tmp_path / "out/hosts_1/stdout.txt").read_text() == "to file\n"
    assert (tmp_path / "out/hosts_0/stderr.txt").read_text() == "e\n"

    r = shared.ok(
        "%%remote --save res --quiet --no-raise\necho out $MONARCH_RANK_hosts; echo err >&2; exit $MONARCH_RANK_hosts"
    )
    assert "[hosts" not in r.stream("stdout")
    check = shared.ok("print([(x.label, x.returncode, x.stdout, x.stderr, x.status) for x in res])")
    assert (
        check.stream()
        == "[('hosts=0', 0, 'out 0\\n', 'err\\n', 'ok'), ('hosts=1', 1, 'out 1\\n', 'err\\n', 'failed')]\n"
    )

    r = shared.ok(
        "%%remote --group --no-raise\necho same; [ $MONARCH_RANK_hosts = 1 ] && echo extra && exit 4; true"
    )
    # the live fold split hosts=1 off at its extra line: the end view would repeat those groups
    assert "[hosts=[0-1] (2)] same\n" in r.stream() and "[hosts=1] extra\n" in r.stream(), r.stream()
    assert "(--group: same groups as above)\n" in r.stream() and "----------------" not in r.stream()


def test_quiet_and_failures(shared):
    r = shared.execute("%remote --quiet --rank 1 echo hidden; exit 3")
    assert "hidden" not in r.stream()
    assert r.error["ename"] == "RemoteError"
    assert r.error["evalue"] == "%%remote: 1 of 1 ranks did not succeed: hosts=1 (rc 3)"
    assert r.error["traceback"] == ["RemoteError: %%remote: 1 of 1 ranks did not succeed: hosts=1 (rc 3)"]
    r = shared.ok("%remote --no-raise exit 2")
    assert run_payload(r)["summary"]["failed"] == 2
    r = shared.execute("%remote --bogus true")
    assert "UsageError" in r.text and "unknown flag" in r.text


def test_the_command_is_run_as_typed_and_help_is_printed(shared):
    # flags after the command's first word are the command's, ours included
    r = shared.ok("%remote --rank 0 echo 'a  b' --rank 1 -h")
    assert lines(r) == ["[hosts=0] a  b --rank 1 -h"]
    r = shared.ok("%remote --help")
    assert "--per-host DIM=N" in r.stream() and "-e, --env KEY=VALUE" in r.stream()
    r = shared.execute("%%remote --timeout 0\ntrue")
    assert (
        "UsageError: %%remote: argument --timeout: must be > 0 seconds, got '0' (see %%remote?)\n" in r.text
    )
    assert "Traceback" not in r.text and "[hosts=" not in r.text


def test_timeout_stops_every_rank(shared):
    start = time.monotonic()
    r = shared.execute("%%remote --timeout 1\necho go; sleep 30 & sleep 40; echo never")
    took = time.monotonic() - start
    assert took < 4, took
    assert "[hosts=0] go" in r.stream() and "never" not in r.stream()
    assert r.error and "hosts=[0-1] (timed out" in r.error["evalue"]  # the same reason: one rank set
    assert run_payload(r)["summary"]["timed_out"] == 2
    time.sleep(0.3)
    assert not [c for c in commands(tagged_pids(shared.tag)) if "sleep" in c]


def test_interrupt_stops_remote_processes_and_next_cell_is_clean(shared):
    outputs = []
    fut_start = time.monotonic()
    import threading

    def interrupt_later():
        time.sleep(1.5)
        shared.interrupt()

    threading.Thread(target=interrupt_later, daemon=True).start()
    r = shared.execute(
        "%%remote\necho started; trap '' INT; sleep 50 & sleep 60; echo unreachable",
        on_output=outputs.append,
    )
    took = time.monotonic() - fut_start
    assert took < 3.5, took
    assert "[hosts=1] started" in r.stream() and "unreachable" not in r.stream()
    assert r.error and r.error["ename"] == "RemoteInterrupted"
    assert (
        r.error["traceback"] == [r.error["traceback"][0]]
        and "KeyboardInterrupt: %%remote stopped" in r.error["traceback"][0]
    )
    assert run_payload(r)["summary"]["interrupted"] == 2
    sleeping = [c for c in commands(tagged_pids(shared.tag)) if "sleep" in c]
    assert not sleeping, sleeping
    nxt = shared.ok("%remote echo next")
    assert sorted(lines(nxt)) == ["[hosts=0] next", "[hosts=1] next"]
    assert "started" not in nxt.text


def test_flood_is_coalesced_and_spooled(shared):
    r = shared.ok("%remote seq 1 200000", timeout=60)
    times = sorted(o.t for o in r.outputs if o.msg_type == "stream")
    most = max(sum(1 for u in times if t <= u < t + 1.0) for t in times)
    assert most <= 20 + 1, times  # 20 in any second, plus the final write
    assert len(r.stream()) < 400_000
    b = run_payload(r)
    log = read_log(Path(shared.cwd, b["log_path"]))
    assert log["hosts=0"] == log["hosts=1"] == [str(i) for i in range(1, 200001)]
    assert b["ranks"][0]["truncated"] == 200000  # streamed: the result keeps none (the log has all)


def test_worker_killed_mid_run(start_kernel, tag):
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=2")
    k.ok("%remote true")
    victim = None

    def on_output(out):
        nonlocal victim
        if victim is None and out.msg_type == "stream" and "tick 2" in out.content.get("text", ""):
            pids = sorted(worker_pids(tag))
            victim = pids[-1]
            os.kill(victim, 9)

    start = time.monotonic()
    r = k.execute("%%remote\nfor i in 1 2 3 4 5 6; do echo tick $i; sleep 0.4; done", on_output=on_output)
    assert victim is not None
    assert time.monotonic() - start < 8
    assert r.error and r.error["ename"] == "RemoteError"
    assert re.search(r"hosts=\d \(worker process \d+ died \(killed by SIGKILL\)\)", r.error["evalue"]), (
        r.error["evalue"]
    )
    b = run_payload(r)
    assert b["summary"] == {"ok": 1, "failed": 1, "timed_out": 0, "skipped": 0, "interrupted": 0}
    ok = next(x for x in b["ranks"] if x["status"] == "ok")
    assert f"[{ok['label']}] tick 6" in r.stream()
    # the kernel is usable and the next run says clearly what is wrong
    assert k.ok("1 + 1").outputs
    again = k.execute("%remote true")
    assert "not healthy" in again.text and "%job apply" in again.text


def test_large_cells_run_from_a_file(shared):
    padding = "#" + "x" * 150_000 + "\n"
    r = shared.ok("%%remote --rank 0 --save big python\n" + padding + "print('big-ok')\n")
    assert lines(r) == ["[hosts=0] big-ok"]
    r = shared.ok("%%remote --rank 0\n" + padding + "echo big-bash")
    assert lines(r) == ["[hosts=0] big-bash"]


def test_observers_and_last_run_for_views(shared):
    shared.ok(
        "import monarch_jupyter.remote as _r\n"
        "class _Seen:\n"
        "    def __init__(self): self.kinds = []\n"
        "    def on_event(self, state, event): self.kinds.append(type(event).__name__)\n"
        "_seen = _Seen(); _r.observers.append(_seen)"
    )
    try:
        shared.ok("%remote --rank 1 echo watched")
        r = shared.ok(
            "print(_seen.kinds[0], _seen.kinds[-1], 'Output' in _seen.kinds, _r.last_run().ranks[0].status)"
        )
        assert r.stream() == "Started Finished True ok\n"
    finally:
        shared.ok("_r.observers.remove(_seen)")


def test_background_children_end_with_the_command(shared):
    r = shared.ok("%remote echo a; (sleep 20; echo never) & echo b")
    assert sorted(lines(r)) == ["[hosts=0] a", "[hosts=0] b", "[hosts=1] a", "[hosts=1] b"]
    assert r.duration < 3
    time.sleep(0.2)
    assert not [c for c in commands(tagged_pids(shared.tag)) if "sleep" in c]


def test_steady_stream_is_coalesced_to_20_messages_a_second(shared):
    r = shared.ok(
        "%%remote python\nimport time\nfor i in range(300):\n    print('line', i, flush=True); time.sleep(0.006)\n"
    )
    times = sorted(o.t for o in r.outputs if o.msg_type == "stream")
    assert times[-1] - times[0] > 1.2
    most = max(sum(1 for u in times if t <= u < t + 1.0) for t in times)
    assert most <= 20 + 1, most
    text = r.stream()
    for rank in (0, 1):
        got = [int(line.split()[-1]) for line in text.splitlines() if line.startswith(f"[hosts={rank}] line")]
        assert got == list(range(300))  # coalesced, not dropped: 300 lines stay under the live budget


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def test_memory_returns_after_a_giant_line(start_kernel):
    """A 50 MB line without newline on 2 ranks once raised kernel RSS by
    ~200 MB for good. What is kept of a line is bounded, so RSS must come back."""
    k = start_kernel()
    k.ok("%load_ext monarch_jupyter")
    k.ok("%job apply --local hosts=2")
    giant = "%%remote python\nimport sys\nsys.stdout.write('x' * ({} << 20)); sys.stdout.flush()\n"
    # warm every code path with a 1 MB line, the grid too (it shows once a run lasts 0.3 s)
    k.ok(giant.format(1) + "import time; time.sleep(0.5)\n")
    pid = int(k.ok("import os, gc; print(os.getpid())").stream())
    k.ok("gc.collect()")
    before = _rss_mb(pid)
    r = k.ok(giant.format(50), timeout=180)
    cut = f"(+{(50 << 20) - 2000} chars)"
    assert r.stream().count(cut) == 2, r.stream()[-500:]  # each rank's line, shown cut
    assert run_payload(r)["streamed"]  # the cut lines are the stream's alone
    k.ok("%remote true")
    k.ok("%remote true")
    k.ok("gc.collect()")
    after = _rss_mb(pid)
    print(f"kernel RSS {before:.0f} MB before, {after:.0f} MB after a 50 MB line on 2 ranks")
    assert after - before < 60, (before, after)


WALK_MODES = (
    "import os, stat\n"
    "_loose = []\n"
    "for _d, _subs, _names in os.walk('.monarch'):\n"
    "    for _p, _want in [(_d, 0o700)] + [(os.path.join(_d, n), 0o600) for n in _names]:\n"
    "        _m = os.lstat(_p).st_mode\n"
    "        if not stat.S_ISLNK(_m) and stat.S_IMODE(_m) != _want:\n"
    "            _loose.append(f'{_p} {stat.S_IMODE(_m):o}')\n"
    "print('LOOSE', sorted(_loose))"
)


def test_every_file_under_dot_monarch_is_private_whatever_the_umask(shared):
    shared.ok("import os; os.umask(0o022)")
    shared.ok("%%remote\necho a-token")
    shared.ok("%remote --detach sleep 0.2")
    shared.ok("%remote runs")
    assert "LOOSE []" in shared.ok(WALK_MODES).stream(), shared.ok(WALK_MODES).stream()


@pytest.mark.parametrize("name", ["get_ipython", "In", "Out", "exit", "_", "_i2"])
def test_save_refuses_a_name_ipython_owns_and_later_magics_still_work(shared, name):
    r = shared.execute(f"%remote --save {name} true")
    assert r.text.strip() == (
        f"UsageError: %remote: argument --save: {name} belongs to IPython (its history and helpers); "
        "choose another name (see %%remote?)"
    ), r.text
    assert "[hosts=0]" in shared.ok("%remote --rank 0 echo still").text
    assert "ok" in shared.ok("print('ok' if callable(get_ipython) else 'broken')").text


def test_per_host_beyond_the_bound_is_refused_before_any_proc_starts(shared):
    r = shared.execute("%remote --per-host gpu=40 true")
    assert r.text.strip() == (
        "UsageError: %remote: --per-host gpu=40 on 2 hosts would start 80 procs, more than the bound of 64 "
        "procs a run; to raise it deliberately: %env MONARCH_JUPYTER_MAX_PROCS=80"
    ), r.text
