"""A rank's namespace process (``remote/host/session.py`` over ``session_server.py``) as the
actor drives it, without Monarch: a real process on a real Unix socket. What it must never do:
lose the namespace to a cell's error or stop, outlive its worker, or serve another user."""

from __future__ import annotations

import asyncio
import os
import pickle
import sys
import time

import pytest

from monarch_jupyter.remote.host import layout, session
from monarch_jupyter.remote.host.spares import prepare


@pytest.fixture
def runs(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    root.mkdir(mode=0o700)
    monkeypatch.setenv(layout.RUNS_DIR_ENV, str(root))
    return root


@pytest.fixture
def namespace(runs):
    folder = session.session_dir("job", "main", "hosts", 0)
    record = session.ensure(folder, dict(os.environ), None, {"name": "main", "key": "hosts", "rank": 0})
    yield folder, record
    asyncio.run(session.stop(folder, record, grace=1.0))
    assert not session.alive(record)


def cell(namespace, code: str, run_id: str, wait: float = 5.0) -> session.SessionCell:
    folder, record = namespace
    rank = layout.rank_dir(run_id, "hosts", 0)
    prepare(rank)
    request = {"op": "exec", "code": code, "filename": f"<{run_id}>", "first_line": 2, "folder": str(rank)}
    ran = session.SessionCell(record, folder / session.SOCK, rank, request)
    ran.finish_now(wait)
    return ran


def text(ran: session.SessionCell) -> str:
    return "".join(chunk.text for chunk in ran.take())


def test_cells_share_a_namespace_and_show_the_last_value(namespace):
    assert cell(namespace, "x = 41", "a").returncode == 0
    second = cell(namespace, "print('x', x)\nx + 1", "b")
    assert (second.returncode, second.value, second.error) == (0, "42", None)
    assert text(second) == "x 41\n"
    assert layout.read_status(second.folder)[0] == 0  # for a kernel that attaches later


def test_an_error_names_the_cell_line_and_keeps_the_namespace(namespace):
    cell(namespace, "kept = 'yes'", "a")
    failed = cell(namespace, "a = 1\nb = {}['nope']", "b")
    assert failed.returncode == 1 and failed.error == "KeyError: 'nope' (cell line 3)"
    shown = text(failed)
    assert 'File "<b>", line 3, in <module>' in shown and "b = {}['nope']" in shown
    assert "session_server" not in shown  # the server's own frames are left out
    assert cell(namespace, "kept", "c").value == "'yes'"


def test_ctrl_c_interrupts_a_sleep_and_the_namespace_lives(namespace):
    cell(namespace, "alive = 1", "a")
    sleeping = cell(namespace, "import time\ntime.sleep(600)", "b", wait=0.2)
    assert sleeping.returncode is None

    async def stop() -> int | None:
        started = time.monotonic()
        await sleeping.stop(grace=2.0)
        code = await sleeping.finish()
        assert time.monotonic() - started < 2
        return code

    assert asyncio.run(stop()) == 130
    assert sleeping.error == "KeyboardInterrupt (cell line 3)"
    assert cell(namespace, "alive + 1", "c").value == "2"


def test_a_second_request_while_a_cell_runs_is_told_busy(namespace):
    folder, _ = namespace
    sleeping = cell(namespace, "import time\ntime.sleep(1.0)", "a", wait=0.05)
    assert session.ask(folder / session.SOCK, {"op": "eval", "expr": "1", "max_bytes": 100})["busy"] is True
    assert session.ask(folder / session.SOCK, {"op": "ping"})["busy"] is True
    asyncio.run(sleeping.finish())
    assert session.ask(folder / session.SOCK, {"op": "ping"})["busy"] is False


def test_values_both_ways_bounded(namespace):
    folder, _ = namespace
    sock = folder / session.SOCK
    assert session.ask(sock, {"op": "push", "items": {"w": pickle.dumps([1, 2, 3])}}) == {"names": ["w"]}
    answer = session.ask(sock, {"op": "eval", "expr": "sum(w)", "max_bytes": 1000})
    assert pickle.loads(answer["data"]) == 6
    big = session.ask(sock, {"op": "eval", "expr": "bytes(5000)", "max_bytes": 1000})
    assert "over the 0.0 MB limit" in big["error"] or "over the" in big["error"], big
    assert "NameError" in session.ask(sock, {"op": "eval", "expr": "nope", "max_bytes": 10})["error"]
    assert "could not unpickle" in session.ask(sock, {"op": "push", "items": {"v": b"junk"}})["error"]


def test_a_runs_folder_deeper_than_a_socket_address_still_serves(tmp_path, monkeypatch):
    root = tmp_path / ("deep" * 30) / "runs"
    root.mkdir(parents=True, mode=0o700)
    monkeypatch.setenv(layout.RUNS_DIR_ENV, str(root))
    folder = session.session_dir("job", "main", "hosts", 0)
    assert len(str(folder / session.SOCK)) > 107  # past sun_path: a plain bind would fail
    record = session.ensure(folder, dict(os.environ), None, {"name": "main", "key": "hosts", "rank": 0})
    try:
        assert cell((folder, record), "x = 6 * 7", "a").returncode == 0
        assert cell((folder, record), "x", "b").value == "42"
        assert session.ask(folder / session.SOCK, {"op": "ping"})["pid"] == record["pid"]
    finally:
        asyncio.run(session.stop(folder, record, grace=1.0))
    assert not session.alive(record)


def test_another_user_is_refused(namespace, second_user):
    folder, _ = namespace
    opened = [folder, *[p for p in folder.parents if p != folder.parents[-1]]]
    modes = {p: os.stat(p).st_mode & 0o7777 for p in opened}
    try:  # even with every folder opened up, the socket's peer check refuses another user
        for path in opened:
            os.chmod(path, modes[path] | 0o711)
        os.chmod(folder / session.SOCK, 0o777)
        probe = (
            "import socket, struct, pickle\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            f"import os; os.chdir({str(folder)!r})\n"  # relative: any runs folder's depth fits
            f"s.connect({session.SOCK!r})\n"
            "d = pickle.dumps({'op': 'ping'})\n"
            # the host may close before the request is written (EPIPE) or after (reset, EOF)
            "try:\n    s.sendall(struct.pack('!Q', len(d)) + d)\n"
            "    print('answer' if s.recv(8) else 'refused')\n"
            "except (ConnectionResetError, BrokenPipeError):\n    print('refused')\n"
        )
        done = second_user.run(sys.executable, "-c", probe)
    finally:
        for path, mode in modes.items():
            os.chmod(path, mode)
    assert "refused" in done.stdout and "answer" not in done.stdout, (done.stdout, done.stderr)
