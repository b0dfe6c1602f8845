"""The live grid's requests against a real kernel and real ``--local hosts=2`` workers, while the
cell streaming the run is still executing: the Stacks button's message names the frame of a rank
stuck in ``time.sleep``, and the resources flag the idle rank beside a spinning one. The client
here plays the front end: it answers the grid's comm_open and sends ipywidgets custom messages on
the shell channel, as JupyterLab's widget manager does."""

from __future__ import annotations

import time

import pytest

from harness import job_kernel

pytestmark = pytest.mark.kernel

CELL = """%%remote python
import os, time
def stuck_in_sleep():
    time.sleep(90)
def spinning():
    end = time.time() + 90
    while time.time() < end:
        pass
print("started", flush=True)
(stuck_in_sleep if os.environ["MONARCH_RANK_hosts"] == "1" else spinning)()
"""


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("gridstacks") / "nb", "hosts=2", "%remote true") as kernel:
        yield kernel


class Front:
    """The widget side of one running cell: iopub read, comm messages sent and collected."""

    def __init__(self, kernel, code: str) -> None:
        self.kc = kernel.kc
        self.msg_id = self.kc.execute(code)
        self.comm_id: str | None = None
        self.state: dict = {}
        self.customs: list[tuple[float, dict]] = []
        self.done = False  # the cell's idle status arrived

    def pump(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=0.05)
            except Exception:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "comm_open" and "can_stacks" in content.get("data", {}).get("state", {}):
                self.comm_id, self.state = content["comm_id"], content["data"]["state"]
            elif kind == "comm_msg" and content.get("comm_id") == self.comm_id:
                data = content.get("data", {})
                if data.get("method") == "custom":
                    self.customs.append((time.monotonic(), data["content"]))
                elif data.get("method") == "update":
                    self.state.update(data.get("state", {}))
            elif kind == "status" and msg["parent_header"].get("msg_id") == self.msg_id:
                self.done = self.done or content["execution_state"] == "idle"

    def until(self, predicate, timeout: float):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            self.pump(0.1)
        return predicate()

    def ask(self, content: dict) -> float:
        msg = self.kc.session.msg(
            "comm_msg", {"comm_id": self.comm_id, "data": {"method": "custom", "content": content}}
        )
        self.kc.shell_channel.send(msg)
        return time.monotonic()

    def answer(self, request_id: str, timeout: float = 20.0) -> tuple[float, dict] | None:
        return self.until(
            lambda: next((c for c in self.customs if c[1].get("id") == request_id), None), timeout
        )


def test_stacks_and_resources_are_answered_while_the_cell_runs(shared):
    front = Front(shared, CELL)
    try:
        assert front.until(lambda: front.comm_id, 30), "no grid was shown"
        assert front.state["can_stacks"] and front.state["can_usage"]
        assert front.until(lambda: all(t["status"] == "running" for t in front.state.get("tiles", [])), 30)
        text = ""
        for attempt in range(20):  # the processes may still be starting: ask again
            asked = front.ask({"kind": "stacks", "id": f"s{attempt}", "ranks": [1]})
            got = front.answer(f"s{attempt}")
            assert got is not None, "no answer to the Stacks request"
            arrived, reply = got
            text = reply.get("text") or reply.get("error", "")
            if "stuck_in_sleep" in text:
                break
            time.sleep(0.5)
        assert "stuck_in_sleep" in text and "hosts=1" in text, text
        assert "spinning" not in text, text  # only the rank asked for
        assert not front.done, "answered only after the cell ended"
        print(f"Stacks round trip while the cell runs: {arrived - asked:.2f} s")
        idle = None
        for attempt in range(10):
            front.ask({"kind": "usage", "id": f"u{attempt}"})
            got = front.answer(f"u{attempt}")
            assert got is not None, "no answer to the resources request"
            ranks = got[1].get("ranks") or {}
            if "0" in ranks and "1" in ranks and float(ranks["0"]["cpu"] or 0) > 10:
                idle = ranks
                break
            time.sleep(1.1)
        assert idle is not None, "no resources sample with rank 0 busy"
        assert idle["1"]["idle"] is True and idle["0"]["idle"] is False, idle
        assert idle["0"]["rss"] > 0 and idle["1"]["rss"] > 0
        assert not front.done
        # the idle rank leaves its group at the next sync, flagged
        assert front.until(lambda: any(g.get("idle") for g in front.state.get("groups", [])), 10), (
            front.state.get("groups")
        )
    finally:
        shared.interrupt()
        front.until(lambda: front.done, 60)
    assert front.done
