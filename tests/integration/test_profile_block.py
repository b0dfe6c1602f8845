"""`with monarch_jupyter.profile() as p:` in a real kernel on a real telemetry job: the block's
trace is written under .monarch/<context>/ and shown, with its messages per actor and endpoint,
when the block ends."""

from __future__ import annotations

import pytest

from harness import job_kernel

pytestmark = pytest.mark.kernel

SETUP = """
from monarch.actor import Actor, endpoint
import monarch_jupyter

class Pinger(Actor):
    @endpoint
    def ping(self) -> int:
        return 1

procs = monarch_jupyter.state().hosts.spawn_procs(per_host={"gpus": 1})
pinger = procs.spawn("pinger", Pinger)
"""


@pytest.fixture(scope="module")
def pkernel(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("profblock") / "nb", "hosts=1 --telemetry", SETUP) as kernel:
        yield kernel


def test_the_block_writes_a_trace_and_shows_it_when_it_ends(pkernel):
    folder = pkernel.cwd / ".monarch/default"
    before = set(folder.glob("profile-*.pftrace"))
    result = pkernel.ok(
        "with monarch_jupyter.profile() as p:\n"
        "    print('INSIDE', p.done)\n"
        "    for _ in range(20):\n"
        "        pinger.ping.call().get()\n"
        "print('AFTER', p.done, p.error, p.path.name)"
    )
    shown = [o for o in result.outputs if o.msg_type == "display_data"]
    assert len(shown) == 1, result.outputs  # one display, when the block ended
    inside = next(o for o in result.outputs if "INSIDE" in o.content.get("text", ""))
    assert inside.t < shown[0].t  # shown after the block, not before
    assert "INSIDE False" in result.text and "AFTER True None profile-" in result.text, result.text
    new = [path for path in set(folder.glob("profile-*.pftrace")) - before]
    assert len(new) == 1 and new[0].stat().st_size > 0, list(folder.iterdir())
    data = shown[0].content["data"]
    assert new[0].name in data["text/plain"] and new[0].name in data["text/html"]
    text = data["text/plain"]
    assert "written to .monarch/default/profile-" in text and "(Wrote " in text, text
    assert "ping" in text and "messages" in text and "spans" in text, text  # spans per actor / endpoint
