"""The process layer of %%remote (``remote/process.py``) with plain asyncio and real
subprocesses: no Monarch, no kernel. Every test reaps what it started (process groups)."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from monarch_jupyter.remote import process as P
from monarch_jupyter.remote.process import Process, ShellKeeper, WarmShell, command_argv, spawn
from monarch_jupyter.remote.protocol import ERR, OUT, Chunk

ENV = dict(os.environ, PYTHONUNBUFFERED="1")


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def bash(script: str, env: dict | None = None, cwd: str | None = None) -> Process:
    return spawn(["bash", "-c", script], env or ENV, cwd)


def group_alive(pgid: int, wait: float = 1.0) -> bool:
    """Whether the group still has a living (not zombie) member ``wait`` seconds from now:
    a killed orphan stays in its group as a zombie until init reaps it, if it ever does."""
    deadline = time.monotonic() + wait
    while True:
        if not _living_members(pgid):
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.01)


def _living_members(pgid: int) -> list[int]:
    living = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, …
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            living.append(int(entry))
    return living


@pytest.fixture(autouse=True)
def reap_groups(monkeypatch):
    """Kill every process group a test started, even when it fails."""
    started: list[int] = []
    real = Process.__init__

    def init(self, popen):
        real(self, popen)
        started.append(self.pid)

    monkeypatch.setattr(Process, "__init__", init)
    yield started
    for pgid in started:
        P.killpg(pgid, signal.SIGKILL)


async def collect(
    proc: Process, drain: float = P.DRAIN_AFTER_EXIT, **batching
) -> tuple[int, list[tuple[float, list[Chunk]]]]:
    """Run ``proc`` to the end: its return code and every batch with its arrival time
    (the rest that ``take()`` returns comes last)."""
    got: list[tuple[float, list[Chunk]]] = []

    async def read() -> None:
        async for chunks in proc.batches(**batching):
            got.append((time.monotonic(), chunks))

    reading = asyncio.ensure_future(read())
    try:
        returncode = await proc.finish(drain=drain)
    finally:
        reading.cancel()
    got.append((time.monotonic(), proc.take()))
    return returncode, got


def text_of(batches, stream=None) -> str:
    return "".join(c.text for _, chunks in batches for c in chunks if stream is None or c.stream == stream)


# ── reading ──
def test_chunks_carry_their_newline_counts_and_streams():
    async def main():
        rc, got = await collect(bash("printf 'a\\nb\\nc'; echo oops >&2; seq 1 5"))
        chunks = [c for _, cs in got for c in cs]
        assert rc == 0
        assert all(c.newlines == c.text.count("\n") for c in chunks)
        assert text_of(got, OUT) == "a\nb\nc1\n2\n3\n4\n5\n" and text_of(got, ERR) == "oops\n"
        for _, batch in got:  # within a batch, consecutive texts of one stream are merged
            assert all(a.stream != b.stream for a, b in itertools.pairwise(batch))

    run(main())


def test_flood_is_read_whole_in_few_batches():
    async def main():
        rc, got = await collect(bash("seq 1 200000"))
        chunks = [c for _, cs in got for c in cs]
        assert rc == 0
        assert sum(c.newlines for c in chunks) == 200000
        assert text_of(got) == "".join(f"{i}\n" for i in range(1, 200001))
        assert len([b for _, b in got if b]) < 50, len(got)  # batched, not one message per read

    run(main())


def test_utf8_split_across_reads_stays_whole_and_arrives_as_it_comes():
    script = (
        "import sys, time\n"
        "sys.stdout.buffer.write(b'caf\\xc3'); sys.stdout.flush(); time.sleep(0.4)\n"
        "sys.stdout.buffer.write(b'\\xa9 done\\n'); sys.stdout.flush()\n"
        "sys.stdout.buffer.write(b'bad \\xff\\n')\n"
    )

    async def main():
        rc, got = await collect(spawn([sys.executable, "-c", script], ENV))
        assert rc == 0
        assert text_of(got) == "café done\nbad \ufffd\n"
        arrived = [(t, c.text) for t, cs in got for c in cs]
        assert (
            arrived[0][1] == "caf" and arrived[-1][0] - arrived[0][0] > 0.3
        )  # shown before the rest was printed

    run(main())


def test_partial_lines_and_carriage_returns_stream_as_printed():
    async def main():
        rc, got = await collect(
            bash("printf 'load 10%%\\r'; sleep 0.3; printf 'load 60%%\\r'; sleep 0.3; echo done")
        )
        assert rc == 0
        texts = [(t, c.text) for t, cs in got for c in cs]
        assert "".join(x for _, x in texts) == "load 10%\rload 60%\rdone\n"
        t10 = next(t for t, x in texts if "10%" in x)
        t60 = next(t for t, x in texts if "60%" in x)
        tend = next(t for t, x in texts if "done" in x)
        assert t60 - t10 > 0.2 and tend - t60 > 0.2, texts

    run(main())


def test_quiet_command_gets_heartbeats():
    async def main():
        rc, got = await collect(bash("sleep 0.8; echo end"), quiet=0.1)
        assert rc == 0 and text_of(got) == "end\n"
        assert sum(1 for _, cs in got if cs == []) >= 3  # empty batches while quiet (the last: take())

    run(main())


def test_tee_gets_the_raw_bytes(tmp_path):
    async def main():
        with open(tmp_path / "o", "wb") as out, open(tmp_path / "e", "wb") as err:
            proc = bash("printf 'x\\xff\\n'; sleep 0.05; echo y; echo z >&2")
            proc.tee(out, err)
            rc, got = await collect(proc)
        assert rc == 0 and text_of(got, OUT) == "x\ufffd\ny\n"
        assert (tmp_path / "o").read_bytes() == b"x\xff\ny\n" and (tmp_path / "e").read_bytes() == b"z\n"

    run(main())


def test_env_and_workdir(tmp_path):
    async def main():
        rc, got = await collect(
            bash("echo $ONLY_HERE; pwd; cat", env=dict(ENV, ONLY_HERE="yes"), cwd=str(tmp_path))
        )
        assert rc == 0 and text_of(got) == f"yes\n{tmp_path}\n"  # stdin is /dev/null: cat ends at once

    run(main())


def test_long_commands_go_through_a_script():
    long = "#" + "x" * (P.MAX_INLINE + 10) + "\necho long-ok"
    argv, script = command_argv("bash", long)
    try:
        assert argv == ["bash", script] and Path(script).read_text() == long

        async def main():
            rc, got = await collect(spawn(argv, ENV))
            assert rc == 0 and text_of(got) == "long-ok\n"

        run(main())
    finally:
        os.unlink(script)
    assert command_argv("python", "print(1)") == ([sys.executable, "-u", "-c", "print(1)"], None)


# ── exit ──
def test_exit_codes_and_signals():
    async def main():
        assert (await collect(bash("exit 3")))[0] == 3
        assert (await collect(bash("sleep 0.05; kill -9 $$")))[0] == -9

    run(main())


def test_finish_now_answers_a_quick_command_without_the_loop():
    async def main():
        proc = bash("echo quick; echo e >&2; exit 4")
        assert proc.finish_now(2.0) == 4
        assert proc.take() == [Chunk(OUT, "quick\n", 1), Chunk(ERR, "e\n", 1)]

        slow = bash("echo started; sleep 1.5; echo later")
        t = time.monotonic()
        assert slow.finish_now(0.05) is None
        assert time.monotonic() - t < 1.0  # waited its limit, not for the command
        rc, got = await collect(slow)  # carries on from there: nothing lost
        assert rc == 0 and text_of(got) == "started\nlater\n"

    run(main())


def test_finish_now_leaves_output_of_a_command_whose_child_holds_the_pipe():
    async def main():
        proc = bash("echo a; sleep 100 & echo b")
        assert proc.finish_now(1.0) is None  # the leader exited, but `sleep` holds stdout
        assert proc.returncode == 0
        start = time.monotonic()
        rc, got = await collect(proc)
        assert rc == 0 and text_of(got) == "a\nb\n"
        assert time.monotonic() - start < P.DRAIN_AFTER_EXIT + P.GRACE + 1
        assert not group_alive(proc.pid)

    run(main())


def test_background_child_holding_the_pipe_is_ended():
    async def main():
        proc = bash("echo a; (sleep 100; echo never) & echo b")
        start = time.monotonic()
        rc, got = await collect(proc)
        took = time.monotonic() - start
        assert rc == 0 and text_of(got) == "a\nb\n"
        assert P.DRAIN_AFTER_EXIT - 0.1 < took < P.DRAIN_AFTER_EXIT + P.GRACE + 1, took
        assert not group_alive(proc.pid)

    run(main())


def test_stray_that_closed_its_pipes_is_killed_at_once():
    async def main():
        proc = bash("sleep 100 >/dev/null 2>&1 & echo done")
        start = time.monotonic()
        rc, got = await collect(proc, drain=10)
        assert rc == 0 and text_of(got) == "done\n"
        assert time.monotonic() - start < 5  # no drain wait: the pipes were closed
        assert not group_alive(proc.pid)

    run(main())


def test_command_that_closes_its_output_is_followed_until_it_exits():
    async def main():
        proc = bash("echo bye; exec >&- 2>&-; sleep 0.6; exit 2")
        start = time.monotonic()
        rc, got = await collect(proc, quiet=0.1)
        assert rc == 2 and text_of(got) == "bye\n" and time.monotonic() - start > 0.5
        assert sum(1 for _, cs in got if cs == []) >= 3  # still heartbeating after the EOF

    run(main())


# ── stopping ──
def test_stop_with_sigint():
    async def main():
        proc = bash("echo up; sleep 100; echo never")
        await asyncio.sleep(0.1)
        start = time.monotonic()
        await proc.stop(grace=2.0)
        rc, got = await collect(proc)
        assert time.monotonic() - start < 1.0  # SIGINT was enough: no grace period spent
        assert rc in (130, -signal.SIGINT) and text_of(got) == "up\n"

    run(main())


def test_stop_escalates_when_sigint_and_sigterm_are_ignored():
    async def main():
        proc = bash("trap '' INT TERM; echo up; sleep 100 & sleep 100; echo never")
        await asyncio.sleep(0.1)
        start = time.monotonic()
        await asyncio.gather(proc.stop(grace=0.3), proc.stop(grace=0.3))  # a second stop joins the first
        took = time.monotonic() - start
        rc, got = await collect(proc)
        assert 0.5 < took < 1.5, took  # SIGINT, 0.3 s, SIGTERM, 0.3 s, SIGKILL
        assert rc == -signal.SIGKILL and text_of(got) == "up\n"
        assert not group_alive(proc.pid)

    run(main())


def test_stop_takes_sigterm_when_sigint_is_trapped():
    async def main():
        proc = bash("trap '' INT; echo up; sleep 100")
        await asyncio.sleep(0.1)
        await proc.stop(grace=0.3)
        rc, _ = await collect(proc)
        assert rc == -signal.SIGTERM

    run(main())


def test_finish_cancelled_kills_the_group():
    async def main():
        proc = bash("sleep 100")
        task = asyncio.ensure_future(proc.finish())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not group_alive(proc.pid)

    run(main())


# ── warm shells ──
def test_warm_shell_runs_as_bash_c(tmp_path):
    async def main():
        env = dict(ENV, WARM="w")
        shell = WarmShell(env, str(tmp_path))
        pid = shell.popen.pid
        proc = shell.take('echo "$0 $WARM $LINENO"; pwd\necho line2 $LINENO; exit 7')
        assert proc is not None and proc.pid == pid
        rc, got = await collect(proc)
        assert rc == 7
        assert text_of(got, OUT) == f"bash w 1\n{tmp_path}\nline2 2\n"

        shell = WarmShell(ENV, None)
        rc, got = await collect(shell.take("if then"))  # a syntax error, reported by eval
        assert rc == 2 and "syntax error" in text_of(got, ERR) and "eval:" in text_of(got, ERR)

        shell = WarmShell(ENV, None)
        assert shell.take("x" * P.WARM_MAX) is None  # too big: discarded, the caller starts it cold
        assert shell.popen.returncode is not None

    run(main())


def test_shell_keeper_reuses_a_shell_started_with_the_same_env_and_cwd(tmp_path):
    async def main():
        keeper = ShellKeeper(delay=0.01)
        try:
            assert keeper.take("true", ENV, None) is None  # nothing warm yet: start cold
            await asyncio.sleep(0.2)
            warm = keeper.shell
            assert warm is not None and warm.env == ENV
            proc = keeper.take("echo warm $$", ENV, None)
            assert proc is not None and proc.pid == warm.popen.pid
            rc, got = await collect(proc)
            assert rc == 0 and text_of(got) == f"warm {proc.pid}\n"

            await asyncio.sleep(0.2)  # the next one was started for the same env and cwd
            other = keeper.shell
            assert other is not None and other is not warm
            assert keeper.take("true", ENV, str(tmp_path)) is None  # another cwd: cold, that one discarded
            assert other.popen.returncode is not None
            await asyncio.sleep(0.2)
            assert keeper.shell is not None and keeper.shell.cwd == str(tmp_path)
            proc = keeper.take("pwd", ENV, str(tmp_path))
            rc, got = await collect(proc)
            assert text_of(got) == f"{tmp_path}\n"
            assert keeper.take("echo a\0b", ENV, str(tmp_path)) is None  # a NUL cannot go through bash
        finally:
            keeper.close()
        assert keeper.shell is None

    run(main())


def test_warm_shell_is_as_killable_as_a_cold_one():
    async def main():
        keeper = ShellKeeper(delay=0.0)
        try:
            keeper.take("true", ENV, None)
            await asyncio.sleep(0.2)
            proc = keeper.take("trap '' INT; sleep 100 & sleep 100", ENV, None)
            assert proc is not None
            await asyncio.sleep(0.1)
            await proc.stop(grace=0.2)
            rc, _ = await collect(proc)
            assert rc == -signal.SIGTERM and not group_alive(proc.pid)
        finally:
            keeper.close()

    run(main())


def test_the_next_shell_waits_longer_while_runs_come_slowly():
    """A user's cells: the next shell starts after the kernel showed the answer (quiet_delay);
    runs back to back keep the short delay; the first run knows no pace yet."""
    from monarch_jupyter.remote.process import SLOW_RUNS

    keeper = ShellKeeper(delay=0.003, quiet_delay=0.015)
    assert keeper.next_delay(now=100.0) == 0.003
    assert keeper.next_delay(now=100.0 + SLOW_RUNS / 4) == 0.003
    assert keeper.next_delay(now=101.0) == 0.015
    assert keeper.next_delay(now=101.0 + SLOW_RUNS / 4) == 0.003
