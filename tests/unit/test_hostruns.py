"""The host side of runs that outlive their kernel (``remote/host/``) with plain asyncio and
real bash: no Monarch, no kernel. A "reader going away" is the reader closing its files without
touching the process, as an actor does when its kernel dies. Every test reaps what it started."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness import poll
from monarch_jupyter.remote.host import layout as L
from monarch_jupyter.remote.host import runs as R
from monarch_jupyter.remote.host import shell
from monarch_jupyter.remote.host import spares as S
from monarch_jupyter.remote.host import tail as T
from monarch_jupyter.remote.host.capture import CapturedProcess
from monarch_jupyter.remote.wire.protocol import ERR, OUT
from monarch_jupyter.system import procfs as _procfs
from monarch_jupyter.system.procfs import killpg

ENV = dict(os.environ, PYTHONUNBUFFERED="1")


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    monkeypatch.setenv("MONARCH_JUPYTER_RUNS_DIR", str(root))
    yield root
    for run_id, pids in R.marked_pids().items():  # everything our runs started, escapees too
        if (root / run_id).exists():
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
    for meta in root.glob("*/*/meta.json"):
        data = L.read_json(meta)
        if data and R.leader_alive(data):
            killpg(int(data["pid"]), signal.SIGKILL)


def start(run_id: str, command: str, mode: str = "bash", rank: int = 0) -> CapturedProcess:
    folder = L.rank_dir(run_id, "hosts", rank)
    S.prepare(folder)
    captured = shell.RunShell(ENV, None).take(folder, run_id, mode, command)
    L.write_meta(
        folder,
        {"pid": captured.pid, "start_ticks": _procfs.start_ticks(captured.pid), "started": time.time()},
    )
    return captured


async def collect(proc: CapturedProcess) -> tuple[int, list]:
    got = []

    async def read():
        async for chunks in proc.batches():
            got.append((time.monotonic(), chunks))

    task = asyncio.ensure_future(read())
    try:
        rc = await proc.finish()
    finally:
        task.cancel()
    for chunks in proc.rest():  # what is left, in bounded batches; then the files are closed
        got.append((time.monotonic(), chunks))
    return rc, got


def text(got, stream=None) -> str:
    return "".join(c.text for _, cs in got for c in cs if stream is None or c.stream == stream)


def open_fds_under(folder: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder)) or target.startswith("anon_inode:inotify"):
            found.append(target)
    return found


async def no_fds_soon(folder: Path, within: float = 2.0) -> bool:
    """Whether every fd of ours under ``folder`` (and inotify) is closed within ``within`` s:
    the last inotify close of a run is left to a helper thread, after its exit was sent."""
    deadline = time.monotonic() + within
    while open_fds_under(folder):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def test_output_streams_from_the_files_as_printed_with_status(runs_dir):
    async def main():
        proc = start("r1", "echo a; sleep 0.4; echo b >&2; exit 3")
        rc, got = await collect(proc)
        assert rc == 3 and text(got, OUT) == "a\n" and text(got, ERR) == "b\n"
        arrived = [(t, c.text) for t, cs in got for c in cs]
        assert arrived[1][0] - arrived[0][0] > 0.3  # a came before b was printed: streamed, not at the end
        assert L.read_status(proc.folder)[0] == 3
        assert (proc.folder / "out").read_text() == "a\n"
        assert await no_fds_soon(runs_dir)  # a finished run holds no fd

    run(main())


def test_wrapper_keeps_bash_c_semantics_and_python(runs_dir):
    async def main():
        rc, got = await collect(start("r2", 'echo "$0 $LINENO $MONARCH_JUPYTER_RUN"\nexit 7'))
        assert rc == 7 and text(got) == "bash 1 r2\n"
        rc, got = await collect(
            start(
                "r3", "import os, sys; print('py', os.environ['MONARCH_JUPYTER_RUN']); sys.exit(4)", "python"
            )
        )
        assert rc == 4 and text(got) == "py r3\n"
        long = "#" + "x" * (shell.INLINE_MAX + 10) + "\necho long-ok"
        rc, got = await collect(start("r4", long))
        assert rc == 0 and text(got) == "long-ok\n" and (runs_dir / "r4/hosts.0/script.sh").exists()
        quick = start("r5", "echo quick")
        assert quick.finish_now(2.0) == 0 and text([(0, quick.take())]) == "quick\n"

    run(main())


def test_signals_are_reported_as_before_and_sigkill_leaves_no_status(runs_dir):
    async def main():
        proc = start("s1", "echo up; sleep 100")
        await asyncio.sleep(0.2)
        await proc.stop(grace=1.0)
        rc, _ = await collect(proc)
        assert rc == -signal.SIGINT and L.read_status(proc.folder)[0] == -signal.SIGINT

        proc = start("s2", "trap '' INT TERM; echo up; sleep 100")
        while (proc.folder / "out").read_text() != "up\n":
            await asyncio.sleep(0.01)
        await proc.stop(grace=0.2)
        rc, _ = await collect(proc)
        assert rc == -signal.SIGKILL  # the parent knows; it writes the status the wrapper could not
        assert L.read_status(proc.folder)[0] == -signal.SIGKILL

    run(main())


def test_a_run_outlives_its_reader_and_a_fresh_reader_gets_every_line_once(runs_dir):
    async def main():
        proc = start("o1", "for i in $(seq 1 40); do echo line $i; sleep 0.02; done; echo end >&2; exit 5")
        proc._watch()
        await asyncio.sleep(0.3)
        proc.tail.close()  # the reader goes away (its kernel died); the command goes on
        assert R.leader_alive(L.read_json(proc.folder / L.META))
        meta = L.read_json(proc.folder / L.META)
        tail = T.Tail(proc.folder, replay=None)
        tail.watch()
        try:
            await R.wait_leader(meta, proc.folder)
            proc.popen.wait()  # (the parent is still this test; it reaps as an actor would)
            returncode, duration, error = await R.ended_status(proc.folder, meta)
            tail.finish()
            chunks = tail.take()
        finally:
            tail.close()
        out = "".join(c.text for c in chunks if c.stream == OUT)
        assert out == "".join(f"line {i}\n" for i in range(1, 41))
        assert returncode == 5 and error is None and duration > 0.5
        assert not open_fds_under(runs_dir)

    run(main())


def test_orphan_killed_with_sigkill_is_reported_lost(runs_dir):
    async def main():
        proc = start("k1", "sleep 100")
        meta = L.read_json(proc.folder / L.META)
        killpg(proc.pid, signal.SIGKILL)
        proc.popen.wait()
        await R.wait_leader(meta, proc.folder)
        returncode, _, error = await R.ended_status(proc.folder, meta)
        assert returncode is None and "killed or lost" in error
        assert R.host_state(["k1"])["k1"]["ranks"]["hosts.0"]["state"] == "lost"
        proc.tail.close()

    run(main())


def test_replay_starts_at_a_line_near_the_end(runs_dir):
    folder = L.rank_dir("t1", "hosts", 0)
    S.prepare(folder)
    (folder / "out").write_text("".join(f"{i:05d}\n" for i in range(10_000)))
    tail = T.Tail(folder, replay=603)  # 3 bytes into line 9899: replay starts at the next line
    try:
        tail.finish()
        out = "".join(c.text for c in tail.take())
    finally:
        tail.close()
    lines = out.splitlines()
    assert lines[0] == "09900" and lines[-1] == "09999" and len(lines) == 100  # whole lines only
    assert tail.skipped == 9900 * 6


def test_replay_keeps_only_the_last_lines(runs_dir):
    folder = L.rank_dir("t2", "hosts", 0)
    S.prepare(folder)
    (folder / "out").write_text("".join(f"{i:05d}\n" for i in range(10_000)) + "partial")
    tail = T.Tail(folder, replay=1 << 20, lines=3)
    try:
        tail.finish()
        assert (
            "".join(c.text for c in tail.take() if c.stream == OUT) == "09998\n09999\npartial"
        )  # a partial line counts
    finally:
        tail.close()


def test_bound_punches_out_the_head_and_readers_skip_it(runs_dir, monkeypatch):
    folder = L.rank_dir("b1", "hosts", 0)
    S.prepare(folder)
    with open(folder / "out", "ab") as f:
        f.write(b"x" * (3 << 20) + b"tail\n")
    fd = os.open(folder / "out", os.O_RDWR)
    try:
        cut = T.libc.punch_head(fd, keep=1 << 20)
    finally:
        os.close(fd)
    assert cut > 0 and os.stat(folder / "out").st_blocks * 512 < (2 << 20)  # freed on disk
    tail = T.Tail(folder)
    try:
        assert tail.streams[0].skipped >= cut  # a full read starts after the hole
        tail.finish()
        assert "".join(c.text for c in tail.take()).endswith("tail\n")
    finally:
        tail.close()


def test_escapees_are_found_by_marker_and_stopped(runs_dir):
    async def main():
        rc, got = await collect(start("e1", "setsid sleep 778 & echo left"))
        assert rc == 0 and text(got) == "left\n"

        # the backgrounded setsid child is an escapee once it has called setsid(): give it a moment
        def escaped():
            found = R.host_state(["e1"])["e1"]
            return found if found["strays"] else None

        state = poll(escaped, timeout=5) or R.host_state(["e1"])["e1"]
        assert state["ranks"]["hosts.0"]["state"] == "exited" and len(state["strays"]) == 1
        assert R.prune(keep=0, min_age=0) == []  # a run with a live process is never pruned
        counts = await R.stop_runs(["e1"], grace=0.3)
        assert counts == {"e1": 1}
        assert not R.marked_pids({"e1"})

    run(main())


def test_stop_runs_stops_groups_it_did_not_start(runs_dir):
    async def main():
        proc = start("g1", "trap '' INT; echo up; sleep 100")
        while (proc.folder / "out").read_text() != "up\n":  # its trap is set
            await asyncio.sleep(0.01)
        start_at = time.monotonic()
        counts = await R.stop_runs(["g1"], grace=0.3)  # as another kernel's actor would
        assert counts == {"g1": 2} and time.monotonic() - start_at < 2  # the shell and its sleep
        assert proc.popen.wait(2) == -signal.SIGTERM
        proc.tail.close()

    run(main())


def test_prune_keeps_running_and_newest_runs(runs_dir):
    async def main():
        for i in range(4):
            await collect(start(f"p{i}", "true"))
            os.utime(runs_dir / f"p{i}", (time.time() - 100 + i, time.time() - 100 + i))
        alive = start("p-live", "sleep 100")
        os.utime(runs_dir / "p-live", (1, 1))  # old, but running
        assert sorted(R.prune(keep=2, min_age=0)) == ["p0", "p1"]
        assert sorted(p.name for p in runs_dir.iterdir() if not p.name.startswith(".")) == [
            "p-live",
            "p2",
            "p3",
        ]
        assert sorted(R.prune(keep=10, max_age=50, min_age=0)) == ["p2", "p3"]
        (runs_dir / "p-starting" / "hosts.0").mkdir(parents=True)  # no status, no meta yet
        assert R.prune(keep=0) == []  # touched in the last minute: it may be a run starting
        await collect(start("p-new", "true"))
        assert R.prune(keep=0) == ["p-new"]  # every rank wrote its status: settled, gone at once
        alive.kill()
        alive.tail.close()

    run(main())


def test_runs_root_refuses_a_folder_others_can_write(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    monkeypatch.setenv("MONARCH_JUPYTER_RUNS_DIR", str(shared))
    with pytest.raises(RuntimeError, match="chmod 700"):
        L.runs_root()
    os.chmod(shared, 0o700)
    assert L.runs_root() == shared
    link = tmp_path / "link"  # a link to a good folder is refused too: someone could swap it
    link.symlink_to(shared)
    monkeypatch.setenv("MONARCH_JUPYTER_RUNS_DIR", str(link))
    with pytest.raises(RuntimeError, match="not a folder of ours"):
        L.runs_root()
    monkeypatch.setenv("MONARCH_JUPYTER_RUNS_DIR", str(tmp_path / "new" / "runs"))
    made = L.runs_root()  # made (with its parents), 0700
    assert made.is_dir() and made.stat().st_mode & 0o777 == 0o700


def test_a_flood_written_at_once_is_handed_out_in_bounded_batches(runs_dir):
    async def main():
        proc = start("f1", "import sys; sys.stdout.write('x' * (5 << 20)); sys.stdout.flush()", "python")
        assert proc.finish_now(5.0) is None  # ended, but too much for one message: the slow path
        rc, got = await collect(proc)
        sizes = [len(c.text) for _, cs in got for c in cs]
        assert rc == 0 and sum(sizes) == 5 << 20 and max(sizes) <= 2 * T.LAST_BYTES, (
            sizes
        )  # bounded (not one 5 MB message)
        assert await no_fds_soon(runs_dir)

    run(main())


def test_the_quick_wait_hands_out_the_first_output_at_once_and_goes_on_for_the_exit(runs_dir):
    async def main():
        proc = start("q1", "echo a; sleep 3")
        began = time.monotonic()
        seen = []
        assert proc.finish_now(1.0, on_output=lambda: seen.append(time.monotonic() - began)) is None
        assert len(seen) == 1 and seen[0] < 0.5  # printed, still running: told at once, once
        _, got = await collect_after_stop(proc)
        assert text(got, OUT) == "a\n"

        proc = start("q2", "echo hi; sleep 1; echo err >&2")
        first = []

        def on_output():  # the first lines go out at once; the wait goes on for the exit
            proc.tail.read()
            first.append((time.monotonic() - began, proc.take()))

        began = time.monotonic()
        assert proc.finish_now(5.0, on_output=on_output) == 0
        ended = time.monotonic() - began
        assert len(first) == 1 and [(c.stream, c.text) for c in first[0][1]] == [(OUT, "hi\n")]
        assert first[0][0] < ended - 0.5 and ended >= 1.0  # before the sleep, not with the exit
        assert [(c.stream, c.text) for c in proc.take()] == [(ERR, "err\n")]  # the rest, with the exit
        assert not proc.tail._notify or proc.tail.closed

    async def collect_after_stop(proc):
        await proc.stop(grace=1.0)
        return await collect(proc)

    run(main())


def test_a_shell_made_ahead_brings_its_rank_folder_and_leaves_none_behind(runs_dir):
    async def main():
        keeper = shell.ShellKeeper(delay=0.0)
        try:
            first = keeper.take(L.rank_dir("k1", "hosts", 0), "k1", "bash", "echo one", ENV, None)
            assert first.finish_now(5.0) == 0
            while keeper.shell is None:  # forked ahead, with the next run's folder
                await asyncio.sleep(0.01)
            spare = keeper.shell.spare
            assert (
                spare is not None
                and spare.is_dir()
                and sorted(os.listdir(spare)) == ["err", "meta.json", "out", "status"]
            )
            assert (
                R.rank_state(spare)["state"] == "lost" and L.read_json(spare / L.META) is None
            )  # empty: absent
            spare_run = keeper.shell.spare_run  # the run's folder, made ahead too: empty
            assert spare_run is not None and os.listdir(spare_run) == []
            run_inode = os.stat(spare_run).st_ino
            folder = L.rank_dir("k2", "hosts", 0)
            second = keeper.take(folder, "k2", "bash", "echo two; exit 4", ENV, None)
            assert not spare.exists() and not spare_run.exists() and second.finish_now(5.0) == 4
            assert os.stat(folder.parent).st_ino == run_inode  # renamed, not made on the path
            assert [c.text for c in second.take()] == ["two\n"] and L.read_status(folder)[0] == 4
            while keeper.shell is None:
                await asyncio.sleep(0.01)
            unused, unused_run = keeper.shell.spare, keeper.shell.spare_run
        finally:
            keeper.close()
        assert not unused.exists() and not unused_run.exists()  # a shell discarded takes its folders
        assert sorted(R.prune(keep=0, min_age=0)) == ["k1", "k2"]
        left = sorted(p.name for p in L.runs_root().iterdir())  # no spare left: the emptied folders
        assert len(left) == 4 and sum(n.startswith(L.FREE) for n in left) == 2
        assert sum(n.startswith(L.FREE_RUN) for n in left) == 2  # the runs' own, empty, for reuse

    run(main())


def test_pruned_rank_folders_are_emptied_and_become_the_next_spares(runs_dir):
    async def main():
        await collect(start("old", "echo secret; echo oops >&2; exit 3"))
        folder = L.rank_dir("old", "hosts", 0)
        (folder / "script.sh").write_text("extra")
        inode = os.stat(folder).st_ino
        out_inode = os.stat(folder / OUT).st_ino
        assert R.prune(keep=0, min_age=0) == ["old"] and not (runs_dir / "old").exists()
        free = [p for p in runs_dir.iterdir() if p.name.startswith(L.FREE)]
        assert [os.stat(p).st_ino for p in free] == [inode]  # the same folder, emptied
        assert sorted(os.listdir(free[0])) == sorted([OUT, ERR, L.STATUS, L.META])
        assert all(os.path.getsize(free[0] / name) == 0 for name in os.listdir(free[0]))

        spares = S.Spares()
        spare = spares.make()  # taken from the free ones: no folder or file created
        assert os.stat(spare).st_ino == inode and os.stat(spare / OUT).st_ino == out_inode
        assert not any(p.name.startswith(L.FREE) for p in runs_dir.iterdir())
        shutil.rmtree(spare)
        fresh = spares.make()  # none left: made anew (ext4 may give it the freed inode's number), empty
        assert sorted(os.listdir(fresh)) == sorted([OUT, ERR, L.STATUS, L.META])
        assert os.path.getsize(fresh / OUT) == 0
        shutil.rmtree(fresh)

        # a run in a reused folder reads back only what it printed itself
        await collect(start("first", "echo one; echo uno >&2"))
        R.prune(keep=0, min_age=0)
        warm = shell.RunShell(ENV, None, spares)  # its folder made ahead: the emptied one
        reused = os.stat(warm.spare).st_ino
        proc = warm.take(L.rank_dir("second", "hosts", 0), "second", "bash", "echo two")
        assert os.stat(L.rank_dir("second", "hosts", 0)).st_ino == reused
        rc, got = await collect(proc)
        assert rc == 0 and text(got) == "two\n"
        assert L.read_status(L.rank_dir("second", "hosts", 0))[0] == 0

    asyncio.run(main())


def test_a_pruned_folder_that_is_not_as_we_made_it_is_removed_not_reused(runs_dir):
    async def main():
        await collect(start("odd", "true"))
        folder = L.rank_dir("odd", "hosts", 0)
        os.unlink(folder / L.STATUS)
        os.mkfifo(folder / L.STATUS)  # emptying must neither wait on it nor keep it
        assert L.read_status(folder) is None
        L.write_status(folder, 1)  # returns: a FIFO is neither read nor written
        await collect(start("linked", "true"))
        target = runs_dir.parent / "not-ours.txt"
        target.write_text("keep me")
        os.unlink(L.rank_dir("linked", "hosts", 0) / OUT)
        os.symlink(target, L.rank_dir("linked", "hosts", 0) / OUT)
        assert sorted(R.prune(keep=0, min_age=0)) == ["linked", "odd"]
        assert target.read_text() == "keep me"  # a link is not followed
        assert not any(p.name.startswith(L.FREE) for p in runs_dir.iterdir())
        assert sorted(runs_dir.iterdir()) == []

    asyncio.run(main())


def test_prune_keeps_at_most_keep_free_emptied_folders(runs_dir, monkeypatch):
    monkeypatch.setattr(S, "KEEP_FREE", 2)

    async def main():
        for i in range(4):
            await collect(start(f"r{i}", "true"))
        assert len(R.prune(keep=0, min_age=0)) == 4
        assert len([p for p in runs_dir.iterdir() if p.name.startswith(L.FREE)]) == 2

    asyncio.run(main())


def test_prune_removes_the_spare_folder_of_an_actor_that_died(runs_dir):
    dead = subprocess.Popen(["true"])
    dead.wait()
    root = L.runs_root()
    stale = root / f"{L.SPARE}{dead.pid}.1"
    stale.mkdir()
    mine = S.Spares().make()
    R.prune(keep=50)
    assert not stale.exists() and mine.exists()  # ours (alive) stays


def test_free_folders_come_from_one_scan_and_survive_other_takers(tmp_path):
    """One scan of the runs folder serves several spares; a name another actor took meanwhile
    is skipped and the folder scanned again; none left: False (the spare is made anew)."""
    spares = S.Spares()
    for name in ("a", "b"):
        (tmp_path / f"{L.FREE}{name}").mkdir()
    assert spares.take_free(tmp_path, tmp_path / "x", L.FREE)
    (left,) = [p for p in tmp_path.iterdir() if p.name.startswith(L.FREE)]
    left.rename(tmp_path / "taken-by-another-actor")
    (tmp_path / f"{L.FREE}c").mkdir()
    assert spares.take_free(tmp_path, tmp_path / "y", L.FREE)
    assert not spares.take_free(tmp_path, tmp_path / "z", L.FREE)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken-by-another-actor", "x", "y"]


def test_a_second_rank_of_a_host_finds_the_runs_folder_there(runs_dir):
    """Two ranks of one run on one host, each with folders made ahead: the first's run folder is
    renamed into place, the second's rank folder goes into it and its unused run folder is
    removed; neither replaces the other's."""
    root = L.runs_root()
    maker = S.Spares()
    spares = [maker.make(root) for _ in range(2)]
    runs = [maker.make_run(spare) for spare in spares]
    first, second = L.rank_dir("two", "hosts", 0), L.rank_dir("two", "hosts", 1)
    S.place(first, spares[0], runs[0])
    S.place(second, spares[1], runs[1])
    assert sorted(os.listdir(root / "two")) == ["hosts.0", "hosts.1"]
    assert not any(p.exists() for p in (*spares, *runs))
    assert sorted(p.name for p in root.iterdir()) == ["two"]


def test_a_free_run_folder_that_is_not_empty_is_not_used(runs_dir):
    """Whatever got into a pruned run's folder meanwhile never shows up in the next run."""
    root = L.runs_root()
    maker = S.Spares()
    stale = root / f"{L.FREE_RUN}abc"
    (stale / "hosts.7").mkdir(parents=True)
    spare = maker.make(root)
    run = maker.make_run(spare)
    assert os.listdir(run) == [] and not stale.exists()
    S.place(L.rank_dir("fresh", "hosts", 0), spare, run)
    assert os.listdir(root / "fresh") == ["hosts.0"]
