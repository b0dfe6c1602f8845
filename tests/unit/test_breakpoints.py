"""The shared record of ranks waiting at a breakpoint (``%remote debug``)."""

from __future__ import annotations

import json
import os
import subprocess

from monarch_jupyter.jobs import breakpoints


def test_written_listed_removed(tmp_path):
    folder = tmp_path / ".monarch" / "ctx" / "actors" / "debug"
    breakpoints.write(folder, "workers", 1, "hosts=1", "cell [3] line 10 in compute()")
    text = breakpoints.waiting_text(folder)
    assert text == (
        "hosts=1 of workers stopped at cell [3] line 10 in compute() (this kernel; no cell was running: "
        "a cell waiting on the call with .get() gets its prompt)\n"
    ), text
    breakpoints.remove(folder, "workers", 1)
    assert breakpoints.waiting_text(folder) == "no rank is waiting at a breakpoint in this context\n"


def test_a_gone_kernel_is_not_shown_and_its_record_goes(tmp_path):
    proc = subprocess.Popen(["true"])
    proc.wait()
    path = tmp_path / f"{proc.pid}-w-0.json"
    path.write_text(json.dumps({"pid": proc.pid, "actor": "w", "rank": "hosts=0", "where": "x"}))
    (tmp_path / "junk.json").write_text("{not json")
    assert breakpoints.waiting(tmp_path) == []
    assert not path.exists()


def test_no_folder_and_a_fifo_do_not_block(tmp_path):
    assert "no rank" in breakpoints.waiting_text(None)
    os.mkfifo(tmp_path / "x.json")
    assert breakpoints.waiting(tmp_path) == []


def test_the_record_says_which_cell_and_whether_it_still_runs(tmp_path):
    folder = tmp_path / "debug"
    breakpoints.write(folder, "w", 0, "gpus=0", "cell [3] line 10 in f()", cell=7, running=True)
    assert "(this kernel; cell [7] is running: its prompt opens while it waits with .get())" in (
        breakpoints.waiting_text(folder)
    )
    breakpoints.write(folder, "w", 0, "gpus=0", "cell [3] line 12 in f()", 7, False, "ValueError: bad")
    text = breakpoints.waiting_text(folder)
    assert text.startswith("gpus=0 of w stopped after ValueError: bad at cell [3] line 12 in f() ("), text
    assert "cell [7], running when it stopped, has ended" in text, text
