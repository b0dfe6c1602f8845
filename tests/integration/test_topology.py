"""The live topology of a real job with a mesh admin: `%job topology` and the `%job` widget,
a user actor seen with its messages processed, a deliberately stuck actor flagged. Real
kernel, real workers; the widget is driven by comm messages as job.js sends them."""

from __future__ import annotations

import re
import time

import pytest

from harness import job_kernel, poll, scratch_kernel, usage_error

pytestmark = pytest.mark.kernel

ACTORS = """
import time
from monarch.actor import Actor, endpoint
import monarch_jupyter

class Counter(Actor):
    def __init__(self):
        self.n = 0

    @endpoint
    def incr(self) -> int:
        self.n += 1
        return self.n

class Blocker(Actor):
    @endpoint
    def block(self) -> None:
        time.sleep(600)

procs = monarch_jupyter.state().hosts.spawn_procs(per_host={"gpus": 1})
counter = procs.spawn("counter", Counter)
for _ in range(5):
    counter.incr.call().get()
"""


@pytest.fixture(scope="module")
def akernel(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("topology") / "nb", "hosts=1 --admin", ACTORS) as kernel:
        yield kernel


def widget_model_id(result) -> str:
    for output in result.outputs:
        data = output.content.get("data", {})
        job = data.get("application/vnd.monarch.job+json") or {}
        if job.get("model_id"):  # static first: our payload names the model
            return job["model_id"]
    raise AssertionError(f"no widget in {result.outputs}")


def send_custom(kernel, model_id: str, content: dict) -> None:
    """A custom message from the front end to the widget (as anywidget's model.send does)."""
    msg = kernel.kc.session.msg(
        "comm_msg", {"comm_id": model_id, "data": {"method": "custom", "content": content}}
    )
    kernel.kc.shell_channel.send(msg)


def sample_with(kernel, line: str, word: str) -> str:
    """``line``'s text once it shows ``word`` (a loaded admin may miss a node in one sample, and
    says so: "N nodes did not answer")."""
    texts: list[str] = []
    poll(lambda: word in (texts.append(kernel.ok(line).text) or texts[-1]), timeout=30, step=0.5)
    return texts[-1]


def test_topology_text_shows_the_user_actor_and_its_messages(akernel):
    text = sample_with(akernel, "%job topology", "counter")
    assert re.search(r"^\d+ hosts? · \d+ procs · \d+ actors?", text, re.M), text
    line = next(line for line in text.splitlines() if "counter" in line)
    assert "processed 5" in line and "queue 0" in line and "STUCK" not in line, text
    assert re.search(r"proc \S+  mem \d+ MB  queue 0", text), text  # each proc's memory
    assert "cast" not in text  # system actors only with --system
    assert "cast" in sample_with(akernel, "%job topology --system", "cast")


def test_widget_samples_while_watched_and_shows_the_actor(akernel):
    shown = akernel.ok("%job")
    model_id = widget_model_id(shown)
    read = (
        "from monarch_jupyter.widgets.comm_model import Model\n"
        f"w = Model.instances[{model_id!r}]\n"
        "acts = [a for h in w.topology.get('hosts', []) for p in h['procs'] for a in p['actors']]\n"
        "print('TOPO', w.topology_available, [(a['name'], a['messages']) for a in acts])"
    )
    assert "TOPO True []" in akernel.ok(read).text  # nobody looked yet: nothing sampled
    send_custom(akernel, model_id, {"kind": "watch", "view": "test", "on": True})
    seen = poll(lambda: "('counter', 5)" in (text := akernel.ok(read).text) and text, timeout=30, step=0.5)
    assert seen, akernel.ok(read).text
    akernel.ok("counter.incr.call().get()")
    assert poll(lambda: "('counter', 6)" in akernel.ok(read).text, timeout=30, step=0.5)
    send_custom(akernel, model_id, {"kind": "watch", "view": "test", "on": False})
    akernel.ok("time.sleep(0.5); before = w.topology")
    akernel.ok("counter.incr.call().get(); time.sleep(3 * 2.0)")
    assert "SAME True" in akernel.ok("print('SAME', w.topology == before)").text  # off screen: not sampled


def test_a_stuck_actor_is_flagged(akernel):
    akernel.ok(
        "blocker = procs.spawn('blocker', Blocker)\n"
        "pending = [blocker.block.call() for _ in range(4)]\n"
        "time.sleep(1.0)"
    )
    early = sample_with(akernel, "%job topology", "blocker")
    assert "STUCK" not in early, early  # busy 1 s: not yet (default: 30 s)
    time.sleep(2.0)
    text = sample_with(akernel, "%job topology --stuck-after 2", "blocker")
    line = next((line for line in text.splitlines() if "blocker" in line), "")
    assert "STUCK" in line and re.search(r"busy \d+ s in block", line), text
    assert "1 stuck" in next(line for line in text.splitlines() if " procs · " in line), text
    counter = next(line for line in text.splitlines() if "counter" in line)
    assert "STUCK" not in counter


def test_without_a_job_or_an_admin_it_says_what_to_do_in_one_line():
    with scratch_kernel("topo-none", kill=True) as kernel:
        kernel.ok("%load_ext monarch_jupyter")
        line = usage_error(kernel.execute("%job topology"))
        assert "no running job in context 'default': %job apply starts one" in line, line
        kernel.ok("%job apply --local hosts=1")
        line = usage_error(kernel.execute("%job topology"))
        assert "has no mesh admin: %job apply --local hosts=2 --admin" in line, line
        line = usage_error(kernel.execute("%job topology --stuck-after x"))
        assert "argument --stuck-after: invalid float value: 'x'" in line, line
