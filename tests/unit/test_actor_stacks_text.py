"""The pure text of ``%remote stacks --actors`` (remote/stacks.py) and the proc registry
(actor_procs.py), over canned py-spy dumps."""

from __future__ import annotations

from monarch_jupyter import actor_procs
from monarch_jupyter.remote import stacks

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
        "processes": [{**proc, "stack": stack, "error": None}],
    }


def test_idle_threads_are_hidden_and_counted():
    assert stacks.actor_stack(IDLE) == "(every thread idle in Monarch's loops: no endpoint running there)"
    text = stacks.actor_stack(STUCK, locate)
    assert text.splitlines()[:5] == [
        'Thread 102 (idle): "monarch-actor-driver"',
        "    allreduce (cell [5] line 7)",
        "        time.sleep(600)",
        "    Trainer.step (cell [5] line 13)",
        "        return allreduce(current_rank().rank)",
    ], text
    assert text.endswith("(2 more threads idle in Monarch's loops)"), text


def test_a_frame_no_cell_defines_keeps_its_file():
    assert "helper (<dynamic-code>:99)" in stacks.with_cells("    helper (<dynamic-code>:99)", locate)


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
