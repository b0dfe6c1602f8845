"""``breakpoint()`` in an actor endpoint, debugged from the cell over the stdin channel (real
kernel, real ``--local hosts=2`` workers)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from harness import job_kernel, poll, scratch_kernel

pytestmark = pytest.mark.kernel

ACTOR = """from monarch.actor import Actor, endpoint, current_rank
import time
import monarch_jupyter

class Stepper(Actor):
    @endpoint
    def compute(self, stop_on: int) -> int:
        rank = current_rank().rank
        x = 40 + rank
        if stop_on == -2 and rank == 1:
            time.sleep(1.5)  # stops while rank 0 is attached
        if rank == stop_on or stop_on < 0:
            breakpoint()
        y = x + 2
        return y

procs = monarch_jupyter.state().hosts.spawn_procs()
steppers = procs.spawn("steppers", Stepper)
"""
BREAK_LINE = next(n for n, line in enumerate(ACTOR.splitlines(), 1) if "breakpoint()" in line)
DEF_LINE = next(n for n, line in enumerate(ACTOR.splitlines(), 1) if "def compute" in line)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("debug") / "nb", "hosts=2", ACTOR) as kernel:
        yield kernel


def scripted(replies: list[str], prompts: list[str]):
    """An ``on_input`` answering ``replies`` in turn (then ``continue``), keeping the prompts."""

    def answer(prompt: str, _result) -> str:
        prompts.append(prompt)
        return replies.pop(0) if replies else "continue"

    return answer


def test_p_n_c_on_one_rank_then_the_result(shared):
    prompts: list[str] = []
    result = shared.execute(
        "print(steppers.compute.call(1).get().item(hosts=1))",
        timeout=90,
        on_input=scripted(["where", "p x", "n", "p y", "l", f"l {DEF_LINE}, {DEF_LINE + 1}", "c"], prompts),
    )
    text = result.text
    assert result.error is None, result.traceback
    cell = re.search(r"hosts=1 stopped at cell \[(\d+)\] line (\d+) in compute\(\)", text)
    assert cell, text
    assert int(cell[2]) == BREAK_LINE, text
    assert prompts and prompts[0] == "[hosts=1] (Pdb) ", prompts
    assert "\n41\n" in text, text  # p x
    assert "\n43\n" in text, text  # p y after n
    assert "y = x + 2" in text, text  # the source line of a notebook-defined class
    assert "[EOF]" not in text, text
    assert text.rstrip().endswith("43"), text  # the call completed with its result
    assert f"{DEF_LINE:4d}   \t    def compute(self, stop_on: int) -> int:" in text, text  # l A, B
    assert "frames of Monarch's dispatch: bt shows them" in text and "threading.py" not in text, text
    assert len(prompts) == 7, prompts


def test_second_rank_while_first_attached_then_attach(shared):
    prompts: list[str] = []
    result = shared.execute(
        "print(steppers.compute.call(-1).get().item(hosts=0))",
        timeout=90,
        on_input=scripted(["p x", "ranks", "attach 1", "p x", "continue"], prompts),
    )
    text = result.text
    assert result.error is None, result.traceback
    assert "hosts=0 stopped at" in text and "hosts=1 stopped at" in text, text
    assert "\n40\n" in text and "\n41\n" in text, text
    assert "[hosts=1] (Pdb) " in prompts, prompts
    assert text.rstrip().endswith("42"), text


def test_a_rank_stopping_while_another_is_attached_is_announced(shared):
    prompts: list[str] = []
    replies = ["p x", "attach hosts=1", "p x", "continue"]

    def answer(prompt: str, _result) -> str:
        prompts.append(prompt)
        if len(prompts) == 1:
            time.sleep(3.0)  # rank 1 stops meanwhile, with rank 0's prompt open
        return replies.pop(0) if replies else "continue"

    result = shared.execute("print(steppers.compute.call(-2).get())", timeout=90, on_input=answer)
    text = result.text
    assert result.error is None, result.traceback
    assert prompts[0] == "[hosts=0] (Pdb) ", prompts
    assert re.search(r"hosts=1 stopped at cell \[\d+\] line \d+ in compute\(\)  \(attach 1\)", text), text
    assert "[hosts=1] (Pdb) " in prompts, prompts
    assert "\n40\n" in text and "\n41\n" in text, text


def test_ctrl_c_while_stopped_releases_the_ranks(shared):
    answered: list[float] = []

    def never(prompt: str, _result) -> str:
        answered.append(time.monotonic())
        shared.interrupt()
        time.sleep(1.0)
        return ""

    result = shared.execute("steppers.compute.call(0).get()", timeout=90, on_input=never)
    assert result.error is not None and result.error["ename"] == "KeyboardInterrupt", result.text
    assert "hosts=0 continued" in result.text, result.text
    # the ranks went on: the next call is answered without any breakpoint
    after = shared.ok("print(steppers.compute.call(5).get().item(hosts=0))", timeout=60)
    assert after.text.strip().endswith("42"), after.text


def test_remote_debug_lists_the_waiting_rank_from_another_kernel(shared):
    with scratch_kernel("debug-other", folder=Path(shared.cwd)) as other:
        other.ok("%load_ext monarch_jupyter")
        listed: list[str] = []

        def answer(prompt: str, _result) -> str:
            if not listed:
                listed.append(other.ok("%remote debug", timeout=60).text)
                return "c"
            return "continue"

        result = shared.execute("steppers.compute.call(1).get()", timeout=90, on_input=answer)
        assert result.error is None, result.traceback
        assert listed and re.search(
            rf"hosts=1 of steppers stopped at cell \[\d+\] line {BREAK_LINE} in compute\(\) \(kernel pid \d+; "
            r"cell \[\d+\] is running: its prompt opens while it waits with \.get\(\)\)",
            listed[0],
        ), listed
        after = poll(lambda: (t := other.ok("%remote debug").text) and "no rank" in t and t, timeout=20)
        assert after.startswith("no rank is waiting"), after


def test_a_front_end_without_stdin_gets_the_ranks_continued(shared):
    result = shared.execute("print(steppers.compute.call(1).get().item(hosts=1))", timeout=90)
    assert result.error is None, result.traceback
    assert "hosts=1 stopped at cell" in result.text, result.text
    assert "sends no input (stdin): stopped ranks continue" in result.text, result.text
    assert result.text.rstrip().endswith("43"), result.text


def test_a_stop_while_the_cell_does_something_else_is_said_then_get_debugs_it(shared):
    """Not waiting in get() (here sleeping; `await` is the same): the cell says where the rank
    stopped, and the prompt opens when the cell waits with get()."""
    prompts: list[str] = []
    result = shared.execute(
        "import time\nfut = steppers.compute.call(0)\ntime.sleep(3)\nprint(fut.get().item(hosts=0))",
        timeout=60,
        on_input=scripted(["p x", "continue"], prompts),
    )
    text = result.text
    assert result.error is None, result.traceback
    assert re.search(r"hosts=0 stopped at cell \[\d+\] line \d+ in compute\(\)  \(the prompt opens", text), (
        text
    )
    assert text.count("hosts=0 stopped at") == 1, text
    assert prompts == ["[hosts=0] (Pdb) ", "[hosts=0] (Pdb) "], prompts
    assert "\n40\n" in text and text.rstrip().endswith("42"), text
