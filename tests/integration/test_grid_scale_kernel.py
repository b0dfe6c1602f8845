"""The live grid of many ranks in a real kernel sends what it draws: 1,024 simulated
ranks (``benchmarks/_scale_driver.py``) print the same lines, so the grid is one group and each
state sync carries one tile, whatever the ranks; the front end's "group identical" unticked
while the cell runs (a state update, read on the shell-channel thread) brings the page of tiles
and those ranks' tails, still during the cell."""

from __future__ import annotations

import json
import queue
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
RANKS = 1024


def test_a_grouped_grid_of_many_ranks_sends_its_groups_and_expands_mid_cell(kernel, workdir):
    kernel.ok(f"import sys; sys.path.insert(0, {str(BENCHMARKS)!r}); import _scale_driver")
    kernel.ok(f"_scale_driver.install(get_ipython(), {str(workdir)!r})")
    kernel.ok(f"_scale_driver.SETTINGS.update(ranks={RANKS}, seconds=6.0, rate=10.0, burst=0, same=True)")
    kc = kernel.kc
    msg_id = kc.execute("%%remote bash --no-raise\nsimulated", store_history=False)
    grid = None
    asked_at = None
    updates: list[tuple[float, dict, int]] = []  # (arrival, state, bytes)
    lines: list[tuple[float, dict]] = []
    idle_at = None
    result_at = closed_at = None
    start = time.monotonic()
    while idle_at is None:
        assert time.monotonic() - start < 120, "the cell did not end"
        try:
            msg = kc.get_iopub_msg(timeout=0.1)
        except queue.Empty:
            continue
        now = time.monotonic()
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status" and content["execution_state"] == "idle":
            idle_at = now
        elif kind == "comm_open" and "tiles" in content["data"].get("state", {}):
            grid = content["comm_id"]
        elif kind == "comm_close" and content["comm_id"] == grid:
            closed_at = now
        elif kind in ("display_data", "update_display_data") and "finished" in json.dumps(content["data"]):
            result_at = now
        elif kind == "comm_msg" and content["comm_id"] == grid:
            data = content["data"]
            if data.get("method") == "update":
                updates.append((now, data["state"], len(json.dumps(data))))
            elif data.get("content", {}).get("kind") == "lines":
                lines.append((now, data["content"]))
        if grid is not None and asked_at is None and len(lines) >= 5:  # ~1 s of batches
            asked_at = time.monotonic()  # the front end unticks "group identical"
            update = {"method": "update", "state": {"grouped": False}, "buffer_paths": []}
            kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": grid, "data": update}))
    assert grid is not None and asked_at is not None, updates[:3]
    before = [(t, s, n) for t, s, n in updates if t < asked_at]
    grouped = [s["groups"] for _, s, _ in before if "groups" in s]
    counts = [g["count"] for g in grouped[-1]]  # one group (a rank lagging 1 s may go on alone)
    assert grouped and max(counts) >= RANKS - 8 and len(counts) <= 8, grouped[-1:]
    assert all(len(s["tiles"]) <= 8 for _, s, _ in before if "tiles" in s)
    assert max(n for _, _, n in before) < 20_000  # a tile a group, not 1,024 tiles
    drawn = {str(g["rank"]) for g in grouped[-1]}
    assert all(set(m["lines"]) <= drawn for t, m in lines if t < asked_at)  # the drawn ranks only
    paged = [(t, s) for t, s, _ in updates if t > asked_at and len(s.get("tiles", [])) > 1]
    assert paged, "no page of tiles after the grid was ungrouped"
    arrived, state = paged[0]
    assert len(state["tiles"]) == 200 and state["tile_count"] == RANKS
    assert arrived < idle_at - 0.5, (arrived - asked_at, idle_at - arrived)  # while the cell ran
    tails = [m["tails"] for t, m in lines if t > asked_at and "tails" in m]
    assert tails and len(tails[0]) >= 199 and all(v[-1][1].startswith("step") for v in tails[0].values())
    # the result took the grid's place, then the grid's model closed: no widget outlives the cell
    assert result_at is not None and closed_at is not None and result_at <= closed_at < idle_at
