"""``%%remote python --session``: each rank's namespace kept between cells, against real kernels
and real workers (2 hosts × 2 procs): state across cells, values both ways, Ctrl-C, errors with
the cell's lines, a kernel restart and attach, ``%job kill``, ``%autoremote``, torch."""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import pytest

from harness import job_kernel, poll, usage_error, worker_pids

pytestmark = pytest.mark.kernel

SESSION = "%%remote python --session --per-host gpus=2\n"
RANKS = ["hosts=0,gpus=0", "hosts=0,gpus=1", "hosts=1,gpus=0", "hosts=1,gpus=1"]


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("sessions") / "nb", "hosts=2") as kernel:
        yield kernel


def rank_lines(text: str) -> dict[str, str]:
    """``[hosts=0,gpus=1] text`` lines → label → text (stdout lines only)."""
    found = {}
    for line in text.splitlines():
        match = re.match(r"\[([^\]:]+)\] (.*)", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def namespace_pids(kernel) -> dict[str, int]:
    r = kernel.ok(SESSION + "import os\nprint(os.getpid())")
    return {label: int(pid) for label, pid in rank_lines(r.stream("stdout")).items()}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_state_lives_across_cells_on_every_rank(shared):
    first = shared.ok(
        SESSION
        + "import os\nrank = int(os.environ['MONARCH_RANK_hosts']) * 2 + int(os.environ['MONARCH_RANK_gpus'])\nsteps = []"
    )
    assert "4 ok" in first.text, first.text
    shared.ok(SESSION + "steps.append(rank * 10)")
    third = shared.ok(SESSION + "steps.append(rank * 10 + 1)\nprint(steps)\nlen(steps)")
    seen = rank_lines(third.stream("stdout"))
    assert sorted(seen) == RANKS, third.text
    for label, text in seen.items():
        point = dict(part.split("=") for part in label.split(","))
        rank = int(point["hosts"]) * 2 + int(point["gpus"])
        assert text == str([rank * 10, rank * 10 + 1]), (label, text)
    # the last expression, folded: every rank has 2 steps
    assert "hosts=0,gpus=[0-1]; hosts=1,gpus=[0-1] (4): 2" in third.stream("stdout"), third.text
    # one process per rank, the same from cell to cell
    assert namespace_pids(shared) == namespace_pids(shared)


def test_a_session_cell_streams_live(shared):
    r = shared.ok(
        SESSION + "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second', flush=True)"
    )
    firsts = [o.t for o in r.outputs if o.msg_type == "stream" and "first" in o.content["text"]]
    seconds = [o.t for o in r.outputs if o.msg_type == "stream" and "second" in o.content["text"]]
    assert firsts and seconds, r.text
    assert min(seconds) - min(firsts) > 1.0, (firsts, seconds)  # the first line came before the sleep ended


def test_pull_and_push_round_trip(shared):
    shared.ok(
        SESSION
        + "import os\nr = int(os.environ['MONARCH_RANK_hosts']) * 2 + int(os.environ['MONARCH_RANK_gpus'])"
    )
    r = shared.ok("v = %remote pull [r, r * r]\nprint(list(v), v.labels)\nprint(v['hosts=1,gpus=1'])")
    assert "[[0, 0], [1, 1], [2, 4], [3, 9]]" in r.stream("stdout"), r.text
    assert "[3, 9]" in r.stream("stdout")
    shared.ok("import numpy as np\nbig = np.arange(1000)\nparts = ['a', 'b', 'c', 'd']")
    pushed = shared.ok("%remote push big offset=100")
    assert "pushed big, offset to 4 ranks of session main" in pushed.stream("stdout"), pushed.text
    shared.ok("%remote push --scatter parts")
    back = shared.ok("w = %remote pull int(big.sum()) + offset, parts\nprint(list(w))")
    assert "[(499600, 'a'), (499600, 'b'), (499600, 'c'), (499600, 'd')]" in back.stream("stdout"), back.text
    one = shared.ok("got = %remote pull --rank 2 r\nprint(list(got))")
    assert "[2]" in one.stream("stdout"), one.text


def test_values_bad_input_is_one_line(shared):
    line = usage_error(shared.execute("%remote pull undefined_name_here"))
    assert line.startswith("UsageError: %remote pull: NameError: name 'undefined_name_here'"), line
    assert line.endswith("on hosts=0,gpus=[0-1]; hosts=1,gpus=[0-1] (4)"), line
    shared.ok("huge = bytes(3_000_000)")
    line = usage_error(shared.execute("%remote push huge --max-bytes 1MB"))
    assert "3.0 MB pickled is over the 1 MB limit" in line, line
    line = usage_error(shared.execute("%remote push --scatter 'huge2=[1, 2]'"))
    assert "2 items for 4 ranks" in line, line
    line = usage_error(shared.execute("%remote pull --session nosuch x"))
    assert "no session 'nosuch'" in line, line
    assert "--session keeps Python namespaces" in usage_error(shared.execute("%%remote bash --session\ntrue"))
    assert "exclude each other" in usage_error(shared.execute("%%remote python --session --detach\npass"))
    line = usage_error(shared.execute("%%remote python --session --per-host gpus=1\npass"))
    assert "cannot change --per-host" in line, line


def test_an_error_on_one_rank_names_the_cell_line(shared):
    r = shared.execute(
        SESSION + "import os\nif os.environ['MONARCH_RANK_gpus'] == '1':\n    {}['missing']\nkept = 1"
    )
    assert r.error is not None and r.error["ename"] == "RemoteError", r.text
    message = r.error["evalue"]
    assert "2 of 4 ranks failed: KeyError: 'missing' (cell line 4)" in message, message
    assert "hosts=0,gpus=1" in message and "hosts=1,gpus=1" in message and "(2)" in message
    assert "Traceback" not in "".join(r.error["traceback"])  # one line; the ranks' tracebacks are in stderr
    err = r.stream("stderr")
    assert "line 4, in <module>" in err and "{}['missing']" in err, err  # the cell's own source line
    # the namespace survived the error: the ranks that got past it have `kept`
    after = shared.ok("got = %remote pull 'kept' in globals()\nprint(list(got))")
    assert "[True, False, True, False]" in after.stream("stdout"), after.text


def test_ctrl_c_interrupts_every_rank_and_keeps_the_namespace(shared):
    shared.ok(SESSION + "survivor = 'still here'")
    sleeping = threading.Event()

    def seen(output) -> None:  # every rank printed before it sleeps: interrupt then
        text = output.content.get("text", "") if output.msg_type == "stream" else ""
        if text.count("sleeping") + seen.count >= 4:
            sleeping.set()
        seen.count += text.count("sleeping")

    seen.count = 0

    def interrupt_when_asleep():
        if sleeping.wait(60):
            time.sleep(0.5)
            shared.interrupt()

    threading.Thread(target=interrupt_when_asleep, daemon=True).start()
    r = shared.execute(
        SESSION + "import time\nprint('sleeping', flush=True)\ntime.sleep(600)", on_output=seen
    )
    assert sleeping.is_set(), r.text
    assert r.error and r.error["ename"] == "RemoteInterrupted", r.text
    assert r.duration < 15, (r.duration, r.text)
    err = r.stream("stderr")  # raised in every rank's code: the same traceback, folded once
    assert (
        "[hosts=0,gpus=0-1; hosts=1,gpus=0-1:err] KeyboardInterrupt" in err
        or err.count("KeyboardInterrupt") >= 4
    ), r.text
    after = shared.ok(SESSION + "print(survivor)")
    assert sorted(rank_lines(after.stream("stdout")).values()) == ["still here"] * 4, after.text


def test_stacks_name_where_a_session_waits(shared):
    result: dict[str, object] = {}

    def run():
        result["r"] = shared.execute(
            SESSION + "import time\ndef waiting_here():\n    time.sleep(600)\nwaiting_here()"
        )

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(2.0)
    # a second client of the same kernel cannot run a cell while one runs: the hosts are asked
    # from a fresh kernel of the same folder instead, as a user's second notebook would
    from harness import scratch_kernel

    with scratch_kernel("stacks", folder=shared.cwd) as other:
        other.ok("%load_ext monarch_jupyter")
        text = other.ok("%remote stacks --session main").stream("stdout")
    shared.interrupt()
    thread.join(30)
    assert "session main: 4 ranks" in text, text
    assert "waiting_here" in text, text
    busy = shared.ok("%remote session ls").stream("stdout")
    assert re.search(r"main\s+4 of 4\s+0", busy), busy


def test_autoremote_sends_every_cell(shared):
    on = shared.ok("%autoremote on")
    assert "autoremote on" in on.stream("stdout")
    r = shared.ok("auto_value = 7\nprint('auto', auto_value)")
    assert "[hosts=1,gpus=0] auto 7" in r.stream("stdout"), r.text
    local = shared.ok("%remote session ls")  # a magic still runs in the kernel
    assert "main" in local.stream("stdout")
    shared.ok("%autoremote off")
    plain = shared.execute("auto_value")
    assert plain.error and plain.error["ename"] == "NameError", plain.text  # it lives on the ranks only
    assert "[7, 7, 7, 7]" in shared.ok("got = %remote pull auto_value\nprint(list(got))").stream("stdout")


def test_torch_process_group_lives_across_cells(shared):
    shared.ok("%remote session start ddp --torch --per-host gpus=2", timeout=180)
    shared.ok(
        "%%remote python --session ddp\nimport torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo')",
        timeout=180,
    )
    r = shared.ok(
        "%%remote python --session ddp\nt = torch.tensor([float(dist.get_rank())])\n"
        "dist.all_reduce(t)\nt.item()"
    )
    assert "(4): 6.0" in r.stream("stdout"), r.text
    shared.ok("%remote session stop ddp")


def test_restart_then_attach_finds_the_namespaces(tmp_path):
    with job_kernel(tmp_path / "nb", "hosts=2") as kernel:
        kernel.ok("%%remote python --session keep\nmemory = [1, 2, 3]")
        before = {
            label: int(pid)
            for label, pid in rank_lines(
                kernel.ok("%%remote python --session keep\nimport os\nprint(os.getpid())").stream("stdout")
            ).items()
        }
        kernel.restart()
        loaded = kernel.ok("%load_ext monarch_jupyter")
        assert "session keep of this context's job" in loaded.text, loaded.text
        attach = kernel.ok("%remote session attach keep")
        assert "session keep: 2 namespaces live, as they were" in attach.stream("stdout"), attach.text
        r = kernel.ok("%%remote python --session keep\nimport os\nmemory.append(os.getpid())\nprint(memory)")
        seen = rank_lines(r.stream("stdout"))
        assert seen == {label: str([1, 2, 3, pid]) for label, pid in before.items()}, (seen, before)
        killed = kernel.ok("%job kill")
        assert "ended 2 session namespaces first" in killed.text, killed.text
        assert poll(lambda: not any(alive(p) for p in before.values()), timeout=10), before
        gone = usage_error(kernel.execute("%remote session attach keep"))
        assert "no job" in gone or "not running" in gone or "%job apply" in gone, gone


def test_a_killed_worker_ends_its_namespaces(tmp_path):
    """Killed from outside (the CLI, a crash): each namespace sees its host's worker gone and ends."""
    with job_kernel(tmp_path / "nb", "hosts=2") as kernel:
        r = kernel.ok("%%remote python --session\nimport os\nprint(os.getpid())")
        pids = [int(text) for text in rank_lines(r.stream("stdout")).values()]
        assert len(pids) == 2 and all(alive(p) for p in pids), pids
        workers = worker_pids(kernel.tag)
        assert len(workers) == 2, workers
        for worker in workers:
            os.kill(worker, signal.SIGKILL)
        assert poll(lambda: not any(alive(p) for p in pids), timeout=15), pids


def test_breakpoint_in_a_session_cell_is_debugged_from_the_cell(shared):
    answers = iter(["p depth * 10", "c"])
    prompts: list[str] = []

    def reply(prompt: str, result) -> str:
        prompts.append(prompt)
        return next(answers)

    r = shared.execute(
        SESSION.replace("\n", " --rank 1\n") + "depth = 5\nbreakpoint()\nafter = depth + 1\nafter",
        on_input=reply,
        timeout=60,
    )
    assert r.error is None, r.text
    assert prompts == ["[hosts=0,gpus=1] (Pdb) "] * 2, prompts
    out = r.stream("stdout")
    assert "-> after = depth + 1" in out and "50" in out, out  # pdb's lines, streamed with the rank's label
    assert "hosts=0,gpus=1 (1): 6" in out, out  # it went on after `c`, the namespace intact


def test_breakpoint_without_input_continues(shared):
    r = shared.execute(SESSION.replace("\n", " --rank 0\n") + "breakpoint()\n'went on'", timeout=60)
    assert r.error is None, r.text
    assert "this front end takes no input, so it continues" in r.text, r.text
    assert "(1): 'went on'" in r.stream("stdout"), r.text


def test_a_breakpoint_of_a_kernel_that_is_gone_is_freed_by_the_next_cell(tmp_path):
    """#42: a session cell waits in pdb and its kernel dies: the next kernel's cell is not
    "busy" forever; pdb is told to quit, the cell says so in one line, ``%remote stop`` claims
    nothing it did not do."""

    class Prompted(Exception):
        pass

    def leave(prompt: str, result) -> str:
        raise Prompted(prompt)

    with job_kernel(tmp_path / "nb", "hosts=1") as kernel:
        with pytest.raises(Prompted):
            kernel.execute("%%remote python --session dbg\nbreakpoint()\n'after'", on_input=leave, timeout=60)
        kernel.restart()  # the kernel at the prompt dies (SIGKILL); the namespace stays in pdb
        loaded = kernel.ok("%load_ext monarch_jupyter").text
        run_id = re.search(r"(\d{8}-\d{6}-[0-9a-f]{6}) \(", loaded).group(1)
        stopped = kernel.ok(f"%remote stop {run_id}").text
        assert "0 processes signalled" not in stopped and f"stopped run {run_id}" not in stopped, stopped
        kernel.ok("%remote session attach dbg")  # its ping frees the namespace
        assert re.search(r"^dbg\s+1 of 1\s+0\s", kernel.ok("%remote session ls").text, re.M)
        r = kernel.execute("%%remote python --session dbg\n1 + 1", timeout=60)
        assert r.error is None, r.text
        out = r.stream("stdout")
        assert "a breakpoint() of a cell whose kernel is gone" in out and "its pdb was told to quit" in out, (
            out
        )
        assert "(1): 2" in out, out
        ls = kernel.ok("%remote session ls").text
        assert re.search(r"^dbg\s+1 of 1\s+0\s", ls, re.M), ls
