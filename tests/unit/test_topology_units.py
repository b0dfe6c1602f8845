"""The live topology from plain rows (services/topology.py) and from admin JSON (services/admin.py)."""

from __future__ import annotations

import pytest

from monarch_jupyter.jobs.services import admin, topology


def rows(processed: int = 5, queue: int = 0, busy: float | None = None) -> list[dict]:
    return [
        {"kind": "host", "id": "h0", "name": "unix:/tmp/hosts_0", "rss": 116_785_152},
        {"kind": "proc", "id": "p0", "parent": "h0", "name": "anon-0", "rss": 176_463_872, "queue": queue},
        {
            "kind": "actor",
            "id": "a0",
            "parent": "p0",
            "name": "counter",
            "status": "idle",
            "messages": 7,
            "queue": 0,
        },
        {
            "kind": "actor",
            "id": "a1",
            "parent": "p0",
            "name": "worker",
            "status": "processing",
            "messages": processed,
            "queue": queue,
            "busy_s": busy,
        },
        {"kind": "actor", "id": "orphan", "parent": "gone", "name": "x"},  # its proc is not in the sample
    ]


def test_build_makes_the_tree_in_row_order():
    tree = topology.build(rows())
    assert [h.name for h in tree.hosts] == ["unix:/tmp/hosts_0"]
    proc = tree.hosts[0].procs[0]
    assert (proc.name, proc.rss) == ("anon-0", 176_463_872)
    assert [(a.name, a.messages, a.queue) for a in proc.actors] == [("counter", 7, 0), ("worker", 5, 0)]
    assert tree.stuck == [] and topology.summary(tree) == "1 host · 1 proc · 2 actors"


def test_a_queue_that_grows_while_nothing_is_processed_is_stuck():
    first = topology.build(rows(processed=5, queue=2))
    assert first.stuck == []  # one sample cannot tell
    second = topology.build(rows(processed=5, queue=4), previous=first)
    assert [a.name for a in second.stuck] == ["worker"]
    assert "1 stuck" in topology.summary(second)
    assert "worker  processing  processed 5  queue 4  ← STUCK" in topology.text(second)
    moving = topology.build(rows(processed=9, queue=4), previous=first)
    assert moving.stuck == []  # it processes: busy, not stuck
    draining = topology.build(rows(processed=5, queue=1), previous=first)
    assert draining.stuck == []


def test_one_long_handler_is_stuck_at_once():
    tree = topology.build(rows(queue=0, busy=60.0))  # a Python actor: its backlog is not in `queue`
    assert [a.name for a in tree.stuck] == ["worker"]
    assert topology.build(rows(queue=0, busy=5.0)).stuck == []
    assert [a.name for a in topology.build(rows(busy=5.0), stuck_after=2).stuck] == ["worker"]


def test_data_puts_stuck_actors_first_and_is_plain():
    import json

    data = topology.to_data(topology.build(rows(queue=3, busy=60.0)))
    json.dumps(data)
    actors = data["hosts"][0]["procs"][0]["actors"]
    assert [a["name"] for a in actors] == ["worker", "counter"] and actors[0]["stuck"]
    assert data["stuck"] == 1 and data["hosts"][0]["procs"][0]["mem"] == "176 MB"


def test_text_tree_and_bad_values():
    tree = topology.build(
        [*rows(), {"kind": "actor", "id": "z", "parent": "p0", "messages": "x", "queue": None}]
    )
    text = topology.text(tree)
    assert text.splitlines()[1].startswith("└─ host unix:/tmp/hosts_0  mem 117 MB")
    assert "   └─ proc anon-0  mem 176 MB  queue 0" in text
    assert "z  ?  processed 0  queue 0" in text
    assert topology.memory(None) == "-" and topology.memory(3_500_000_000) == "3.5 GB"


# ── admin JSON → rows ──
NODES = {
    "root": {"identity": "root", "children": ["host:H"]},
    "host:H": {
        "identity": "host:H",
        "properties": {"Host": {"addr": "unix:/tmp/hosts_0", "memory": {"process_rss_bytes": 100}}},
        "children": ["P@x"],
    },
    "P@x": {
        "identity": "anon-0<abc>@x",
        "properties": {
            "Proc": {
                "proc_name": "anon-0",
                "system_children": ["cast.P@x"],
                "debug": {"memory": {"process_rss_bytes": 200}, "actor_work_queue_depth_total": 3},
            }
        },
        "children": ["counter<q>.P@x", "cast.P@x"],
    },
    "counter<q>.P@x": {
        "identity": "counter<q>.anon-0<abc>@x",
        "as_of": "2026-12-02T01:52:40.000Z",
        "properties": {
            "Actor": {
                "actor_status": "processing: handler",
                "messages_processed": 4,
                "queue_depth": 3,
                "is_system": False,
                "execution": {"active_handlers": [{"name": "h", "oldest_since": "2026-12-02T01:52:10.000Z"}]},
            }
        },
    },
    "cast.P@x": {"identity": "cast.P@x", "properties": {"Actor": {"is_system": True}}},
}


def fake_get(url: str, ref: str) -> dict:
    return NODES[ref]


def test_admin_rows_skip_system_actors_unless_asked():
    found = admin.rows("http://x", get=fake_get)
    assert [(r["kind"], r["name"]) for r in found] == [
        ("host", "unix:/tmp/hosts_0"),
        ("proc", "anon-0"),
        ("actor", "counter"),
    ]
    actor = found[2]
    assert (actor["status"], actor["messages"], actor["queue"]) == ("processing", 4, 3)
    assert actor["busy_s"] == pytest.approx(30.0) and actor["busy_in"] == "h"
    assert found[1]["rss"] == 200 and found[1]["queue"] == 3
    assert [r["name"] for r in admin.rows("http://x", system=True, get=fake_get)][-1] == "cast"
    tree = topology.build(found)
    assert [a.name for a in tree.stuck] == ["counter"]  # 30 s in one handler
    assert "counter  processing  processed 4  queue 3  busy 30 s in h  ← STUCK" in topology.text(tree)


def test_admin_url_and_unreachable_admin_are_one_line():
    with pytest.raises(admin.TopologyError, match="no mesh admin: %job apply --local hosts=2 --admin"):
        admin.admin_url({"admin": None})
    with pytest.raises(admin.TopologyError, match="did not answer"):
        admin.get_node("http://127.0.0.1:9", "root", timeout=2)


def test_a_node_that_does_not_answer_is_counted_not_fatal(monkeypatch):
    monkeypatch.setattr(admin, "RETRY_AFTER", 0.0)
    asked: list[str] = []

    def flaky(url: str, ref: str) -> dict:
        asked.append(ref)
        if ref == "cast.P@x" or ref.startswith("counter"):
            raise admin.TopologyError("the mesh admin answered 503 for " + ref)
        return NODES[ref]

    found = admin.rows("http://x", system=True, get=flaky)
    tree = topology.build(found)
    assert [a.name for a in tree.actors()] == [] and tree.missing == 2
    assert topology.summary(tree) == "1 host · 1 proc · 0 actors · 2 nodes did not answer"
    assert asked.count("cast.P@x") == 2  # asked once more before it counts as missing

    def down(url: str, ref: str) -> dict:
        raise admin.TopologyError("did not answer")

    with pytest.raises(admin.TopologyError):
        admin.rows("http://x", get=down)
