"""Upstream's own notebook idioms with the extension loaded and no ``%job``: procs of
``this_host().spawn_procs(...)`` and of a ``ProcessJob`` built in a cell get live labelled
output, grouped errors and the in-cell debugger (real kernel, real procs)."""

from __future__ import annotations

import re
import time

import pytest

from harness import poll, scratch_kernel

pytestmark = pytest.mark.kernel

SETUP = """from monarch.actor import Actor, endpoint, current_rank, this_host
import sys, time

class Talker(Actor):
    @endpoint
    def talk(self, pause: float) -> int:
        rank = current_rank().rank
        print(f"hello {rank}")
        print(f"oops {rank}", file=sys.stderr)
        time.sleep(pause)
        return rank

    @endpoint
    def fail(self) -> int:
        rank = current_rank().rank
        if rank == 1:
            raise KeyError(rank)
        raise ValueError(f"bad {rank}")

    @endpoint
    def halt(self) -> int:
        x = 40 + current_rank().rank
        breakpoint()
        return x + 2

procs = this_host().spawn_procs(per_host={"gpus": 2})
talkers = procs.spawn("talkers", Talker)
"""


def line_of(text: str) -> int:
    return next(n for n, line in enumerate(SETUP.splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    folder = tmp_path_factory.mktemp("every") / "nb"
    folder.mkdir()
    with scratch_kernel("every", folder=folder) as kernel:
        kernel.ok("%load_ext monarch_jupyter")
        setup = kernel.ok(SETUP)
        kernel.setup_text = setup.text
        yield kernel


def arrivals(result) -> dict[str, float]:
    found: dict[str, float] = {}
    for o in result.outputs:
        if o.msg_type == "stream":
            for line in o.content["text"].splitlines():
                found.setdefault(line, o.t)
    return found


def test_this_host_prints_arrive_live_labelled_once_with_no_monarch_banner(shared):
    assert "Monarch internal logs" not in shared.setup_text, shared.setup_text
    r = shared.ok("talkers.talk.call(1.5).get()")
    got = arrivals(r)
    for rank in (0, 1):
        for line in (f"[gpus={rank}] hello {rank}", f"[gpus={rank}:err] oops {rank}"):
            assert line in got, r.stream()
            assert r.duration - got[line] > 1.0, (line, got[line], r.duration)  # while the call ran
    lines = r.stream().splitlines()
    assert sorted(lines) == sorted(got), lines  # each line once
    assert not [line for line in lines if not line.startswith("[gpus=")], lines  # nothing unlabelled
    assert shared.ok("print('next')").stream() == "next\n"


def test_this_host_errors_are_grouped_with_the_cells_lines(shared):
    r = shared.execute("talkers.fail.call().get()")
    text = r.traceback
    assert text.splitlines()[0] == (
        "ActorError: talkers.fail() failed on 2 of 2 ranks (gpus=0-1): ValueError, KeyError"
    ), text
    assert "── rank gpus=0: ValueError: bad 0" in text and "── rank gpus=1: KeyError: 1" in text
    assert re.search(rf"cell \[\d+\] line {line_of('raise KeyError')}, in Talker.fail", text), text
    assert "<dynamic-code>" not in text


def test_this_host_breakpoint_is_debugged_from_the_cell(shared):
    prompts: list[str] = []

    def answer(prompt: str, _result) -> str:
        prompts.append(prompt)
        return "p x" if len(prompts) == 1 else "continue"

    r = shared.execute("print(talkers.halt.call().get().item(gpus=1))", timeout=90, on_input=answer)
    assert r.error is None, r.traceback
    assert re.search(
        rf"gpus=\d stopped at cell \[\d+\] line {line_of('breakpoint()')} in halt\(\)", r.text
    ), r.text
    assert prompts and re.fullmatch(r"\[gpus=\d\] \(Pdb\) ", prompts[0]), prompts
    assert r.text.rstrip().endswith("43"), r.text


def test_a_process_job_built_in_a_cell_forwards_its_procs_output(shared):
    shared.ok(
        "from monarch.job import ProcessJob\n"
        "pjob = ProcessJob({'hosts': 2})\n"
        "pprocs = pjob.state(cached_path=None).hosts.spawn_procs()\n"
        "ptalkers = pprocs.spawn('ptalkers', Talker)",
        timeout=120,
    )
    try:
        r = shared.ok("ptalkers.talk.call(1.2).get()")
        got = arrivals(r)
        for rank in (0, 1):
            line = f"[hosts={rank}] hello {rank}"
            assert line in got and r.duration - got[line] > 0.8, r.stream()
    finally:
        killed = shared.execute("pjob.kill(); time.sleep(0.8)", timeout=60)
    # a job killed on purpose takes its procs along: no proc is said to have died
    assert "died" not in killed.text + shared.ok("time.sleep(0.5)").text, killed.text


PING_PONG = """
class Ping(Actor):
    def __init__(self):
        self.seen = 0

    @endpoint
    def pong(self, n: int) -> int:
        print(f"pong {n} on {current_rank().rank}")
        return n + 1

ping_procs = this_host().spawn_procs(per_host={"gpus": 1})
pong_procs = this_host().spawn_procs(per_host={"gpus": 1})
ping = ping_procs.spawn("ping", Ping)
pong = pong_procs.spawn("pong", Ping)
"""


def test_ping_pong_between_two_meshes(shared):
    shared.ok(PING_PONG)
    r = shared.ok(
        "n = 0\nfor _ in range(3):\n    n = ping.pong.call_one(n).get()\n    n = pong.pong.call_one(n).get()\nprint(n)"
    )
    assert r.stream().rstrip().endswith("6"), r.stream()
    lines = r.stream().splitlines()
    for n in range(6):
        assert [line for line in lines if line.endswith(f"] pong {n} on 0")], lines
    # two live meshes of one shape ({gpus: 1}): each line says which mesh it came from
    ping_labels = {line.split("]")[0] for line in lines if re.search(r"pong [024] on", line)}
    pong_labels = {line.split("]")[0] for line in lines if re.search(r"pong [135] on", line)}
    assert len(ping_labels) == 1 and len(pong_labels) == 1 and ping_labels != pong_labels, lines
    assert all(re.fullmatch(r"\[\S+ gpus=0", label) for label in ping_labels | pong_labels), lines


POST_MORTEM = """\
class Crasher(Actor):
    @endpoint
    def crash(self) -> int:
        rank = current_rank().rank
        x = 40 + rank
        breakpoint()
        if rank == 1:
            raise ValueError(f"bad after the breakpoint: {x}")
        return x

crashers = procs.spawn("crashers", Crasher)
"""


def test_breakpoint_on_every_rank_then_an_error_prompts_post_mortem_and_raises(shared):
    shared.ok(POST_MORTEM)
    prompts: list[str] = []
    replies: list[str] = []

    def answer(prompt: str, result) -> str:
        prompts.append(prompt)
        replies.append("p x" if "post-mortem" in result.text and "p x" not in replies else "c")
        return replies[-1]

    r = shared.execute("crashers.crash.call().get()", timeout=90, on_input=answer)
    text = r.text
    raise_line = next(n for n, line in enumerate(POST_MORTEM.splitlines(), 1) if "raise ValueError" in line)
    assert re.search(
        rf"gpus=1 stopped after ValueError: bad after the breakpoint: 41 at cell \[\d+\] line {raise_line} "
        r"in crash\(\) \(post-mortem\)",
        text,
    ), text
    assert "\n41\n" in text, text  # p x in the post-mortem frame
    assert r.error is not None and r.error["ename"] == "ActorError", text
    assert "crashers.crash() failed on 1 of 2 ranks (gpus=1): ValueError" in r.traceback, r.traceback
    assert len(prompts) <= 5, prompts  # two breakpoints, the post-mortem stop and its p x
    assert "no rank is waiting" in shared.ok("%remote debug").text


def test_a_stopped_cell_frees_every_rank_held_by_the_debugger(shared):
    def interrupt(prompt: str, result) -> str:
        shared.interrupt()
        time.sleep(1.0)
        return ""

    r = shared.execute("crashers.crash.call().get()", timeout=60, on_input=interrupt)
    assert r.error is not None and r.error["ename"] == "KeyboardInterrupt", r.text
    assert "continued" in r.text, r.text
    # rank 1, continued, raised and stopped post-mortem: freed too, nothing is left waiting
    assert poll(lambda: "no rank is waiting" in shared.ok("%remote debug").text, 15, 0.5)
    # the same actors answer a new call (a rank held in pdb would queue it forever)
    r = shared.execute("crashers.crash.call().get()", timeout=60, on_input=lambda p, r: "continue")
    assert "crashers.crash() failed on 1 of 2 ranks (gpus=1): ValueError" in r.traceback, r.text


SLEEPERS = """\
import os

class Sleeper(Actor):
    @endpoint
    def pid(self) -> int:
        return os.getpid()

    @endpoint
    def nap(self, seconds: float) -> int:
        time.sleep(seconds)
        return current_rank().rank

sleep_procs = this_host().spawn_procs(per_host={"gpus": 2})
sleepers = sleep_procs.spawn("sleepers", Sleeper)
print(list(sleepers.pid.call().get().values()))
"""


def test_a_proc_killed_mid_call_is_announced_in_the_cell_within_a_second(shared):
    import os
    import signal
    import threading

    pids = [int(p) for p in shared.ok(SLEEPERS).stream().strip().splitlines()[-1].strip("[]").split(",")]
    # an earlier test's stop (Ctrl-C of a cell) opened the window in which ends count as intended
    # (proc_watch.STOP_GRACE, a known limit: ends are not yet told apart by mesh): let it close
    shared.ok(
        "import time as _t\nfrom monarch_jupyter.actors import proc_watch as _w\n"
        "from monarch_jupyter.runtime import faults as _f\n"
        "_t.sleep(max(0.0, _w.STOP_GRACE + 0.2 - (_t.monotonic() - _f._expected_at)))"
    )
    killed_at: list[float] = []

    def kill() -> None:
        killed_at.append(time.monotonic())
        os.kill(pids[1], signal.SIGKILL)

    start = time.monotonic()
    threading.Timer(1.0, kill).start()
    r = shared.execute("sleepers.nap.call(6).get()", timeout=90)
    said = [o for o in r.outputs if o.msg_type == "stream" and "died" in o.content["text"]]
    assert said, r.text
    line = said[0].content["text"].strip()
    assert re.fullmatch(
        rf"monarch_jupyter: proc gpus=1 of \S+ \(pid {pids[1]}\) died: .+ \(during cell \[\d+\]\); "
        r"calls to its actors fail",
        line,
    ), line
    assert start + said[0].t - killed_at[0] < 1.0, (said[0].t, killed_at[0] - start)
    # the call's own error: one compact line naming the call, the rank and the signal
    assert r.error is not None and r.error["ename"] == "SupervisionError", r.text
    assert r.error["evalue"] == "sleepers.nap() failed: gpus=1's process was killed by SIGKILL", r.error
    assert "Traceback" not in r.traceback and "Rust" not in r.traceback, r.traceback
    # said once: not again in the next cell
    assert "died" not in shared.ok("print('next')").text
    # procs stopped on purpose are no fault either
    stopped = shared.ok(
        "more = this_host().spawn_procs(per_host={'gpus': 1})\n"
        "more.spawn('more', Sleeper).pid.call().get()\n"
        "more.stop().get()\n"
        "time.sleep(0.8)",
        timeout=60,
    )
    assert "died" not in stopped.text + shared.ok("time.sleep(0.5)").text, stopped.text


def test_a_job_whose_workers_all_vanish_is_said_at_once_in_one_line(shared):
    import os
    import signal

    shared.ok(
        "import os\n"
        "from monarch.job import ProcessJob\n"
        "class Who(Actor):\n"
        "    @endpoint\n"
        "    def ids(self) -> tuple:\n"
        "        return os.getpid(), os.getppid()\n"
        "djob = ProcessJob({'hosts': 2})\n"
        "dwho = djob.state(cached_path=None).hosts.spawn_procs().spawn('dwho', Who)\n"
        "print(sorted(dwho.ids.call().get().values()))",
        timeout=120,
    )
    ids = shared.ok("print(sorted(dwho.ids.call().get().values()))").stream().strip().splitlines()[-1]
    pairs = [tuple(int(x) for x in pair.strip("() ").split(",")) for pair in ids.strip("[]").split("), (")]
    try:
        from monarch_jupyter.actors.proc_watch import STOP_GRACE

        time.sleep(STOP_GRACE)  # ends right after another test's stop() or kill() are taken as meant
        start = time.monotonic()
        for pid, worker in pairs:  # every worker and proc at the same instant, as in the issue
            os.kill(worker, signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)
        r = shared.ok("time.sleep(1.5)")
        said = [o for o in r.outputs if o.msg_type == "stream" and "gone" in o.content["text"]]
        assert len(said) == 1, r.text
        workers = ", ".join(str(w) for w in sorted(w for _, w in pairs))
        assert (
            said[0]
            .content["text"]
            .startswith(
                f"monarch_jupyter: the job's workers (pids {workers}) are gone, with 2 actor procs (during cell ["
            )
        ), said[0].content["text"]
        assert time.monotonic() - start - (r.duration - said[0].t) < 1.0, said[
            0
        ].t  # within a second of the kill
        assert "proc hosts=" not in r.text, r.text  # not once per proc as well
    finally:
        shared.execute("djob.kill()", timeout=60)


PHILOSOPHERS = """\
class Philosopher(Actor):
    def __init__(self):
        self.neighbour = None

    @endpoint
    def seat(self, neighbour) -> None:
        self.neighbour = neighbour

    @endpoint
    def dine(self) -> int:
        return self.neighbour.pass_fork.call_one().get()  # waits for the neighbour, who waits for us

    @endpoint
    def pass_fork(self) -> int:
        return self.neighbour.pass_fork_back.call_one().get()

    @endpoint
    def pass_fork_back(self) -> int:
        return 1

table = this_host().spawn_procs(per_host={"gpus": 1})
left = table.spawn("left", Philosopher)
right_table = this_host().spawn_procs(per_host={"gpus": 1})
right = right_table.spawn("right", Philosopher)
left.seat.call_one(right).get()
right.seat.call_one(left).get()
"""


def test_a_deadlock_like_dining_philosophers_is_shown_by_stacks(shared):
    shared.ok(PHILOSOPHERS)
    assert shared.ok("dinner = left.dine.call_one()").error is None  # left waits on right, right on left
    dine = next(n for n, line in enumerate(PHILOSOPHERS.splitlines(), 1) if "def dine" in line) + 1
    fork = next(n for n, line in enumerate(PHILOSOPHERS.splitlines(), 1) if "def pass_fork(" in line) + 1

    def both_stuck() -> str:
        out = shared.ok("%remote stacks --actors").stream()
        return out if f"line {dine})" in out and f"line {fork})" in out else ""

    text = poll(both_stuck, timeout=30, step=0.5)
    assert text, shared.ok("%remote stacks --actors").stream()
    assert re.search(rf"Philosopher\.dine \(cell \[\d+\] line {dine}\)", text), text
    assert re.search(rf"Philosopher\.pass_fork \(cell \[\d+\] line {fork}\)", text), text
    assert "<dynamic-code>" not in text, text


CRAWLER = """\
import warnings

class Queue(Actor):
    def __init__(self):
        self.todo = list(range(12))
        self.done = []

    @endpoint
    def next(self) -> int:
        return self.todo.pop(0) if self.todo else -1

    @endpoint
    def finish(self, item: int, by: int) -> None:
        self.done.append((item, by))

    @endpoint
    def results(self) -> list:
        return sorted(self.done)

class Crawler(Actor):
    @endpoint
    def crawl(self, queue) -> int:
        me, count = current_rank().rank, 0
        while (item := queue.next.call_one().get()) >= 0:
            print(f"crawled {item}")
            queue.finish.call_one(item, me).get()
            count += 1
        warnings.warn(f"queue empty after {count}")
        return count

queue = this_host().spawn_procs(per_host={"gpus": 1}).spawn("queue", Queue)
crawlers = this_host().spawn_procs(per_host={"workers": 3}).spawn("crawlers", Crawler)
"""


def test_a_crawler_fans_out_through_a_queue_actor_with_labelled_lines_and_warnings(shared):
    shared.ok(CRAWLER)
    r = shared.ok("print(sum(crawlers.crawl.call(queue).get().values()))")
    lines = r.stream().splitlines()
    assert lines[-1] == "12", lines
    crawled = sorted(int(line.rsplit(" ", 1)[1]) for line in lines if " crawled " in line)
    assert crawled == list(range(12)), lines
    assert all(re.match(r"\[workers=[0-2]\] crawled \d+$", line) for line in lines if "crawled" in line), (
        lines
    )
    warn = next(n for n, line in enumerate(CRAWLER.splitlines(), 1) if "warnings.warn(" in line)
    warned = [line for line in lines if "UserWarning" in line]
    assert len(warned) == 3, lines
    for line in warned:  # the warning's place in the notebook, not <dynamic-code>:N
        assert re.match(
            rf"\[workers=[0-2]:err\] cell \[\d+\] line {warn}: UserWarning: queue empty after", line
        ), line
    assert shared.ok("print(len(queue.results.call_one().get()))").stream().strip() == "12"
