"""The pure text of ``%remote stacks --actors`` (remote/view/stacks.py) and the proc registry
(actor_procs.py), over canned py-spy dumps."""

from __future__ import annotations

from monarch_jupyter.remote.view import stacks
from monarch_jupyter.system import actor_procs

IDLE = """Thread 100 (idle): "MainThread"
    EpollSelector.select (selectors.py:468)
    BaseEventLoop.run_forever (asyncio/base_events.py:607)
    invoke_main (monarch/_src/actor/bootstrap_main.py:77)
    _run_module_as_main (<frozen runpy>:198)
Thread 101 (idle): "monarch-jupyter-out"
    _pump (<string>:215)
    Thread.run (threading.py:982)
Thread 102 (idle): "monarch-actor-driver"
    _sync_dispatch_loop (monarch/_src/actor/actor_mesh.py:1637)
    Thread.run (threading.py:982)"""

STUCK = IDLE.replace(
    "    _sync_dispatch_loop (monarch/_src/actor/actor_mesh.py:1637)",
    "    allreduce (<dynamic-code>:7)\n    Trainer.step (<dynamic-code>:13)\n"
    "    _sync_dispatch_loop (monarch/_src/actor/actor_mesh.py:1659)",
)
CELL = {7: "        time.sleep(600)\n", 13: "        return allreduce(current_rank().rank)\n"}


def locate(qualname: str, line: int):
    return (5, CELL[line]) if line in CELL else None


def threads(text: str) -> list[dict]:
    """A py-spy text dump (no header) as :class:`pyspy.Thread` records."""
    out: list[dict] = []
    for line in text.splitlines():
        if line.startswith("Thread "):
            head, _, name = line.partition(": ")
            tid, _, status = head[len("Thread ") :].partition(" (")
            out.append({"id": tid, "status": status[:-1], "name": name.strip('"'), "frames": []})
        else:
            name, _, where = line.strip()[:-1].rpartition(" (")
            file, _, number = where.rpartition(":")
            out[-1]["frames"].append({"name": name, "file": file, "line": int(number)})
    return out


def answer(rank: int, pid: int, stack: str) -> dict:
    proc = {"pid": pid, "state": "S", "wchan": "-", "cmd": "python -m bootstrap_main", "python": True}
    return {
        "key": "anon",
        "rank": rank,
        "point": {"hosts": rank // 2, "gpus": rank % 2},
        "folder": None,
        "state": "running",
        "pid": pid,
        "actor": True,
        "processes": [{**proc, "threads": threads(stack), "more": 0, "error": None}],
    }


def _text(stack: str, locate=None) -> str:
    shown, idle = stacks.actor_stack(threads(stack), locate)
    proc = {"pid": 1, "python": True, "cmd": "", "threads": shown, "idle": idle}
    return "\n".join(line.removeprefix("    ") for line in stacks.process_text(proc).splitlines()[1:])


def test_idle_threads_are_hidden_and_counted():
    assert _text(IDLE) == "(every thread idle in Monarch's loops: no endpoint running there)"
    text = _text(STUCK, locate)
    assert text.splitlines()[:5] == [
        'Thread 102 (idle): "monarch-actor-driver"',
        "    allreduce (cell [5] line 7)",
        "        time.sleep(600)",
        "    Trainer.step (cell [5] line 13)",
        "        return allreduce(current_rank().rank)",
    ], text
    assert text.endswith("(2 more threads idle in Monarch's loops)"), text


def test_a_frame_no_cell_defines_keeps_its_file():
    [frame] = stacks.with_cells([{"name": "helper", "file": "<dynamic-code>", "line": 99}], locate)
    assert stacks.frame_line(frame) == ["helper (<dynamic-code>:99)"]


def test_the_stuck_rank_stands_out_and_the_rest_fold():
    hosts = [[answer(0, 10, IDLE), answer(1, 11, IDLE)], [answer(2, 12, STUCK), answer(3, 13, IDLE)]]
    text = stacks.render_actors(stacks.actor_answers(hosts, locate), gone=1)
    lines = text.splitlines()
    assert lines[0] == "actors (anon): 4 procs, 2 different stacks; 1 proc spawned earlier is gone", text
    assert lines[1] == "hosts=0,gpus=[0-1]; hosts=1,gpus=1 (3):", text
    assert lines[2] == "    pid …", text
    assert "hosts=1,gpus=0:" in lines and "    pid 12" in lines, text
    assert "            allreduce (cell [5] line 7)" in lines, text
    assert "bootstrap_main" not in text  # every actor proc runs Monarch's bootstrap: not repeated


def test_no_proc():
    assert stacks.render_actors([]) == "no actor proc of this kernel is running\n"


def test_registry_names_meshes_and_tells_same_named_spawns_apart():
    actor_procs.forget(actor_procs.known())
    for spawn, pid in ((1, 50), (1, 51), (2, 52)):
        actor_procs.add(
            {
                "pid": pid,
                "start": 7,
                "host": "h",
                "proc": f"anon-{pid - 50}<Xy12>@anon-{pid - 50}<Xy12>.ipc:///tmp/x/hosts_0",
                "spawn": spawn,
                "rank": pid - 50,
                "point": [("hosts", pid - 50)],
            }
        )
    actor_procs.add({"kind": "proc"})  # no pid: ignored
    meshes = [(p["pid"], p["mesh"]) for p in actor_procs.known()]
    assert meshes == [(50, "anon#1"), (51, "anon#1"), (52, "anon#2")], meshes
    actor_procs.forget([p for p in actor_procs.known() if p["spawn"] == 1])
    assert [p["mesh"] for p in actor_procs.known()] == ["anon"]
    actor_procs.forget(actor_procs.known())
    assert actor_procs.mesh_name("trainers-12<abc>@x") == "trainers"


class _Loop:
    def run(self, coroutine, timeout=None):
        import asyncio

        return asyncio.run(coroutine)


class _Session:
    loop = _Loop()


class _Runner:
    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def call_all(self, endpoint, *args, timeout=None):
        self.calls.append((endpoint, *args))
        return self.answers


class _Cell:
    def __init__(self, runner):
        self.session, self.runner, self.written = _Session(), runner, []

    def write(self, text):
        self.written.append(text)


def _known(pid: int) -> None:
    actor_procs.add(
        {"pid": pid, "start": 1, "host": "h", "proc": "anon-0<a>@x", "rank": 0, "point": [("hosts", 0)]}
    )


def test_the_verb_asks_the_hosts_and_forgets_procs_none_has(monkeypatch):
    from monarch_jupyter.remote.cell import verbs

    actor_procs.forget(actor_procs.known())
    _known(2**22 + 11)  # no such process here: only the hosts' answer counts
    runner = _Runner([[answer(0, 2**22 + 11, STUCK)]])
    cell = _Cell(runner)
    verbs.dispatch(
        cell, "stacks", {"run": None, "ranks": None, "point": None, "native": False, "actors": True}
    )
    assert runner.calls[0][0] == "actor_stacks" and runner.calls[0][1][0]["pid"] == 2**22 + 11
    assert cell.written[0].startswith("actors (anon): 1 proc, 1 different stack"), cell.written
    runner.answers = []  # its proc is gone now
    verbs.dispatch(
        cell, "stacks", {"run": None, "ranks": None, "point": None, "native": False, "actors": True}
    )
    assert cell.written[-1] == "no actor proc of this kernel is running; 1 proc spawned earlier is gone\n"
    assert actor_procs.known() == []


def test_a_bare_stacks_with_only_gone_procs_says_no_run_runs(monkeypatch):
    from monarch_jupyter.remote.cell import verbs

    monkeypatch.setattr(verbs.diagnose, "running_entries", lambda session, runner: [])
    actor_procs.forget(actor_procs.known())
    _known(2**22 + 12)
    cell = _Cell(_Runner([]))
    verbs.dispatch(
        cell, "stacks", {"run": None, "ranks": None, "point": None, "native": False, "actors": False}
    )
    assert cell.written == [
        "no run is running in this context: %remote runs lists them, %remote stacks RUN picks one\n"
    ]
