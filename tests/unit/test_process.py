"""A command run the way the actor runs it (``remote/host/``: a :class:`ShellKeeper`'s wrapper
shell, a :class:`CapturedProcess` reading its rank folder) with plain asyncio and real bash: no
Monarch, no kernel. Reading, exit, stopping (the escalation with trapped signals), a background
child, cancel, and the keeper's delays. Every test reaps what it started (process groups)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from monarch_jupyter.remote.host import capture
from monarch_jupyter.remote.host import layout as L
from monarch_jupyter.remote.host import runs as R
from monarch_jupyter.remote.host import shell as shell_mod
from monarch_jupyter.remote.host.capture import CapturedProcess
from monarch_jupyter.remote.host.shell import SLOW_RUNS, RunShell, ShellKeeper
from monarch_jupyter.remote.host.spares import prepare
from monarch_jupyter.remote.wire.protocol import ERR, OUT, Chunk
from monarch_jupyter.system import procfs as _procfs

ENV = dict(os.environ, PYTHONUNBUFFERED="1")
_ids = itertools.count()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


@pytest.fixture(autouse=True)
def reap_groups(tmp_path, monkeypatch) -> Iterator[list[int]]:
    """A runs folder of its own; every process group a test started is killed, even when it fails."""
    root = tmp_path / "runs"
    monkeypatch.setenv("MONARCH_JUPYTER_RUNS_DIR", str(root))
    started: list[int] = []
    real = CapturedProcess.__init__

    def init(self, popen, folder):
        real(self, popen, folder)
        started.append(self.pid)

    monkeypatch.setattr(CapturedProcess, "__init__", init)
    yield started
    for pgid in started:
        _procfs.killpg(pgid, signal.SIGKILL)
    run_ids = {p.name for p in root.iterdir()} if root.exists() else set()
    for pid in itertools.chain.from_iterable(R.marked_pids(run_ids).values()):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def folder_for(run_id: str) -> Path:
    folder = L.rank_dir(run_id, "hosts", 0)
    prepare(folder)
    return folder


def bash(script: str, env: dict | None = None, cwd: str | None = None, mode: str = "bash") -> CapturedProcess:
    run_id = f"p{os.getpid()}-{next(_ids)}"
    proc = RunShell(env or ENV, cwd).take(folder_for(run_id), run_id, mode, script)
    assert proc is not None
    return proc


def group_alive(pgid: int, wait: float = 1.0) -> bool:
    """Whether the group still has a living (not zombie) member ``wait`` seconds from now."""
    deadline = time.monotonic() + wait
    while True:
        if not _procfs.group_alive(pgid):
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.01)


async def collect(
    proc: CapturedProcess, drain: float = capture.DRAIN_AFTER_EXIT, **batching
) -> tuple[int, list[tuple[float, list[Chunk]]]]:
    """Run ``proc`` to the end: its return code and every batch with its arrival time
    (what ``rest()`` hands out comes last)."""
    got: list[tuple[float, list[Chunk]]] = []

    async def read() -> None:
        async for chunks in proc.batches(**batching):
            got.append((time.monotonic(), chunks))

    reading = asyncio.ensure_future(read())
    try:
        returncode = await proc.finish(drain=drain)
    finally:
        reading.cancel()
    for chunks in proc.rest():
        got.append((time.monotonic(), chunks))
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
        rc, got = await collect(bash(script, mode="python"))
        assert rc == 0
        assert text_of(got) == "café done\nbad \ufffd\n"
        arrived = [(t, c.text) for t, cs in got for c in cs]
        assert arrived[0][1] == "caf" and arrived[-1][0] - arrived[0][0] > 0.3  # shown before the rest

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
        assert sum(1 for _, cs in got if cs == []) >= 3  # empty batches while quiet

    run(main())


def test_tee_gets_the_raw_bytes(tmp_path):
    async def main():
        with open(tmp_path / "o", "wb") as out, open(tmp_path / "e", "wb") as err:
            proc = bash("sleep 0.1; printf 'x\\xff\\n'; sleep 0.05; echo y; echo z >&2")
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


def test_a_syntax_error_is_reported_as_bash_c_would():
    async def main():
        rc, got = await collect(bash("if then"))
        assert rc == 2 and "syntax error" in text_of(got, ERR)

    run(main())


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


def test_finish_now_leaves_a_command_whose_background_child_lives_to_the_slow_path():
    async def main():
        proc = bash("echo a; sleep 100 & echo b")
        assert proc.finish_now(1.0) is None  # the leader exited, but `sleep` is still in its group
        assert proc.returncode == 0
        start = time.monotonic()
        rc, got = await collect(proc)
        assert rc == 0 and text_of(got) == "a\nb\n"
        assert time.monotonic() - start < capture.DRAIN_AFTER_EXIT + _procfs.GRACE + 1
        assert not group_alive(proc.pid)

    run(main())


def test_background_child_holding_output_is_ended_after_the_drain():
    async def main():
        proc = bash("echo a; (sleep 100; echo never) & echo b")
        start = time.monotonic()
        rc, got = await collect(proc)
        took = time.monotonic() - start
        assert rc == 0 and text_of(got) == "a\nb\n"
        assert capture.DRAIN_AFTER_EXIT - 0.1 < took < capture.DRAIN_AFTER_EXIT + _procfs.GRACE + 1, took
        assert not group_alive(proc.pid)

    run(main())


def test_background_child_that_ignores_sigterm_is_killed():
    async def main():
        proc = bash("(trap '' TERM; sleep 100) & echo b")
        start = time.monotonic()
        rc, got = await collect(proc, drain=0.1)
        took = time.monotonic() - start
        assert rc == 0 and text_of(got) == "b\n"
        assert 0.1 + _procfs.GRACE - 0.1 < took < 0.1 + _procfs.GRACE + 1, took  # SIGTERM, grace, SIGKILL
        assert not group_alive(proc.pid)

    run(main())


def test_command_that_closes_its_output_is_followed_until_it_exits():
    async def main():
        proc = bash("echo bye; exec >&- 2>&-; sleep 0.6; exit 2")
        start = time.monotonic()
        rc, got = await collect(proc, quiet=0.1)
        assert rc == 2 and text_of(got) == "bye\n" and time.monotonic() - start > 0.5
        assert sum(1 for _, cs in got if cs == []) >= 3  # still heartbeating after it closed its output

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
        while (proc.folder / OUT).read_text() != "up\n":  # its traps are set
            await asyncio.sleep(0.01)
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
        while (proc.folder / OUT).read_text() != "up\n":
            await asyncio.sleep(0.01)
        await proc.stop(grace=0.3)
        rc, _ = await collect(proc)
        assert rc == -signal.SIGTERM

    run(main())


def test_cancel_kills_the_group_and_its_escapees():
    """The actor's ``cancel``: the run's group stopped, then every process carrying its marker."""

    async def main():
        proc = bash("trap '' INT; setsid sleep 779 & echo up; sleep 100")
        run_id = proc.folder.parent.name
        L.write_meta(proc.folder, {"pid": proc.pid, "start_ticks": _procfs.start_ticks(proc.pid)})
        while (proc.folder / OUT).read_text() != "up\n":
            await asyncio.sleep(0.01)
        # "up" can arrive before the background child has called setsid(): wait for the escape.
        deadline = time.monotonic() + 5
        while not R.outside(R.marked_pids({run_id}).get(run_id, []), {proc.pid}):
            assert time.monotonic() < deadline, "the escapee never left the run's group"
            await asyncio.sleep(0.01)
        assert len(R.outside(R.marked_pids({run_id})[run_id], {proc.pid})) == 1  # the escapee
        await proc.stop(grace=0.3)
        await R.stop_runs([run_id], grace=0.3)
        rc, _ = await collect(proc)
        assert rc == -signal.SIGTERM and not group_alive(proc.pid)
        assert not R.marked_pids({run_id})

    run(main())


def test_finish_cancelled_leaves_the_run_running_and_closes_its_files():
    """The actor going away (its kernel died): the run goes on, captured on its host."""

    async def main():
        proc = bash("sleep 100")
        task = asyncio.ensure_future(proc.finish())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert proc.tail.closed and group_alive(proc.pid, wait=0.2)
        proc.kill()
        assert not group_alive(proc.pid)

    run(main())


# ── the keeper ──
def test_shell_keeper_reuses_a_shell_started_with_the_same_env_and_cwd(tmp_path):
    async def main():
        keeper = ShellKeeper(delay=0.01)
        try:
            first = keeper.take(
                folder_for("k0"), "k0", "bash", "true", ENV, None
            )  # nothing warm: started now
            assert first.finish_now(2.0) == 0
            await asyncio.sleep(0.2)
            warm = keeper.shell
            assert warm is not None and warm.env == ENV
            proc = keeper.take(L.rank_dir("k1", "hosts", 0), "k1", "bash", "echo warm $$", ENV, None)
            assert proc.pid == warm.popen.pid
            rc, got = await collect(proc)
            assert rc == 0 and text_of(got) == f"warm {proc.pid}\n"

            await asyncio.sleep(0.2)  # the next one was started for the same env and cwd
            other = keeper.shell
            assert other is not None and other is not warm
            cold = keeper.take(folder_for("k2"), "k2", "bash", "true", ENV, str(tmp_path))
            assert cold.pid != other.popen.pid  # another cwd: started now, that one discarded
            assert other.popen.returncode is not None
            assert cold.finish_now(2.0) == 0
            await asyncio.sleep(0.2)
            assert keeper.shell is not None and keeper.shell.cwd == str(tmp_path)
            proc = keeper.take(L.rank_dir("k3", "hosts", 0), "k3", "bash", "pwd", ENV, str(tmp_path))
            rc, got = await collect(proc)
            assert text_of(got) == f"{tmp_path}\n"
        finally:
            keeper.close()
        assert keeper.shell is None

    run(main())


def test_warm_shell_is_as_killable_as_a_cold_one():
    async def main():
        keeper = ShellKeeper(delay=0.0)
        try:
            keeper.take(folder_for("w0"), "w0", "bash", "true", ENV, None).finish_now(2.0)
            await asyncio.sleep(0.2)
            warm = keeper.shell
            assert warm is not None
            proc = keeper.take(
                L.rank_dir("w1", "hosts", 0), "w1", "bash", "trap '' INT; sleep 100 & sleep 100", ENV, None
            )
            assert proc.pid == warm.popen.pid
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
    keeper = ShellKeeper(delay=0.003, quiet_delay=0.015)
    assert keeper.next_delay(now=100.0) == 0.003
    assert keeper.next_delay(now=100.0 + SLOW_RUNS / 4) == 0.003
    assert keeper.next_delay(now=101.0) == 0.015
    assert keeper.next_delay(now=101.0 + SLOW_RUNS / 4) == 0.003


def test_the_keeper_starts_the_next_shell_after_its_delay():
    async def main():
        keeper = ShellKeeper(delay=0.5, quiet_delay=5.0)
        try:
            taken = keeper.take(folder_for("d0"), "d0", "bash", "true", ENV, None)
            assert keeper.shell is None  # not on the run's path: started later, on the loop
            taken.finish_now(2.0)
            deadline = time.monotonic() + 5  # then started: soon, but a loaded machine forks slowly
            while keeper.shell is None and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert keeper.shell is not None and keeper.shell.spare is not None  # with its rank folder
        finally:
            keeper.close()

    run(main())


assert sys.platform.startswith("linux")  # /proc, pidfds, inotify


def test_the_leader_is_started_without_forking_the_worker_where_perl_can():
    """No preexec_fn (which makes Popen fork the whole worker: ~9 ms of CPU a shell more, see
    shell.py): perl sets the subreaper flag and execs the wrapper bash."""
    if shell_mod.perl_leader() is None:
        pytest.skip("no perl on this host: the forked fallback is tested in test_hardening_procs")
    with mock.patch.object(shell_mod.subprocess, "Popen", wraps=subprocess.Popen) as popen:
        run = RunShell(ENV, None)
    try:
        argv, kwargs = popen.call_args
        assert kwargs["preexec_fn"] is None and argv[0][0].endswith("perl")
        deadline = time.monotonic() + 5
        while (_procfs.exe(run.popen.pid) or "").endswith("perl") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (_procfs.exe(run.popen.pid) or "").endswith("bash")  # perl exec'd it, and it waits
    finally:
        run.discard()
