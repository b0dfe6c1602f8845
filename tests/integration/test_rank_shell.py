"""A shell on a rank against a real kernel and real ``--local hosts=2`` workers: the command
``%remote shell`` prints, run on a pty (Python's ``pty``), is a shell on that rank's host with
``MONARCH_RANK_*`` set, in the notebook's folder; it ends with nothing left on the host when it
exits or its terminal goes away; and the server's route opens it in a real jupyter_server
terminal, read and typed over the terminal's websocket, and closing that terminal ends it."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import select
import shlex
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness import child_pids, job_kernel, poll, usage_error
from monarch_jupyter.remote import rank_shell

pytestmark = pytest.mark.kernel

SHELL_MIME = "application/vnd.monarch.shell+json"
PROBE = (
    b"echo R=$MONARCH_RANK_hosts S=$MONARCH_SIZE_hosts C=$(pwd) P=$$ "
    b"A=$(ps -o ppid= -p $PPID | tr -d ' '); echo D'O'NE\n"
)
ANSWER = re.compile(rb"R=(\S*) S=(\S*) C=(\S+) P=(\d+) A=(\d+)\r?\nDONE")


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("rankshell") / "nb", "hosts=2") as kernel:
        yield kernel


def _workers(kernel) -> dict[str, int]:
    status = json.loads((kernel.cwd / ".monarch" / "default" / "status.json").read_text())
    return status["worker_pids"]


def _shell_command(kernel, rank: int) -> list[str]:
    result = kernel.ok(f"%remote shell --rank {rank}")
    (data,) = [o.content["data"] for o in result.outputs if "data" in o.content]
    line = data[SHELL_MIME]["command"]
    assert data["text/plain"].endswith(line)
    words = shlex.split(line)
    assert words[:3] == ["cd", str(kernel.cwd), "&&"]
    return words[3:]


class Pty:
    """A command on a pty of its own, read without blocking."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: exec at once
            os.chdir(cwd)
            os.execv(argv[0], argv)
        self.out = b""
        self.status: int | None = None

    def read_until(self, pattern: re.Pattern[bytes] | bytes, timeout: float = 90) -> re.Match[bytes] | None:
        regex = pattern if isinstance(pattern, re.Pattern) else re.compile(re.escape(pattern))
        deadline = time.monotonic() + timeout
        while (found := regex.search(self.out)) is None and time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    break
                if not data:
                    break
                self.out += data
        return found

    def wait(self, timeout: float = 30) -> int | None:
        """Its exit status once it exited (None: still running after ``timeout`` s)."""
        if self.status is not None:
            return self.status
        deadline = time.monotonic() + timeout
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                return self.status
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)


PROMPT = re.compile(rb"exit or Ctrl-D ends it.*[#$] $", re.S)  # typed earlier, bash's start would drop it


def _probe(shell: Pty) -> re.Match[bytes]:
    assert shell.read_until(PROMPT), shell.out[-2000:]
    os.write(shell.fd, PROBE)
    found = shell.read_until(ANSWER)
    assert found, shell.out.decode(errors="replace")[-3000:]
    return found


def test_the_printed_command_is_a_shell_on_that_rank(shared) -> None:
    workers = _workers(shared)
    shell = Pty(_shell_command(shared, 1), shared.cwd)
    try:
        rank, size, cwd, _, grandparent = _probe(shell).groups()
        # the shell's parent is a proc spawned by rank 1's host: the worker hosts_1
        assert (rank, size) == (b"1", b"2")
        assert cwd.decode() == str(shared.cwd)
        assert int(grandparent) == workers["hosts_1"]
        assert child_pids(workers["hosts_1"]), "the shell's proc runs under hosts_1"
        os.write(shell.fd, b"exit 3\n")
        assert shell.wait() == 3
    finally:
        if shell.wait(0) is None:
            os.kill(shell.pid, signal.SIGKILL)
            shell.wait()
    assert poll(lambda: not child_pids(workers["hosts_1"]), timeout=20), "the shell's proc outlived it"


@pytest.mark.parametrize("how", ["hangup then kill", "pty closed"])
def test_a_vanished_terminal_leaves_nothing_on_the_host(shared, how: str) -> None:
    workers = _workers(shared)
    shell = Pty(_shell_command(shared, 1), shared.cwd)
    _probe(shell)
    client = poll(lambda: child_pids(shell.pid), timeout=5)
    assert client, "the Monarch client runs in a child of the terminal's process"
    if how == "pty closed":
        os.close(shell.fd)
    else:  # as terminado's terminate(force=True): SIGHUP, then SIGKILL
        os.kill(shell.pid, signal.SIGHUP)
        time.sleep(0.1)
        os.kill(shell.pid, signal.SIGKILL)
    shell.wait()
    assert poll(lambda: not child_pids(workers["hosts_1"]), timeout=20), (
        "the shell's proc outlived its terminal"
    )
    assert poll(lambda: not os.path.exists(f"/proc/{client[0]}"), timeout=20), (
        "the client outlived its terminal"
    )


def test_bad_ranks_are_one_line(shared) -> None:
    assert "rank 5 is out of range: mesh hosts has 2 ranks (0–1)" in usage_error(
        shared.execute("%remote shell --rank 5")
    )
    assert "--rank" in usage_error(shared.execute("%remote shell --rank -1"))
    argv = [sys.executable, "-m", "monarch_jupyter.remote.rank_shell", "--rank", "5"]
    shell = Pty(argv, shared.cwd)
    assert shell.wait() == 2
    shell.read_until(b"\n", timeout=5)
    lines = [line for line in shell.out.decode().splitlines() if line.strip()]
    assert (
        lines[-1] == "monarch_jupyter.remote.rank_shell: rank 5 is out of range: mesh hosts has 2 ranks (0–1)"
    ), lines
    assert "Traceback" not in shell.out.decode()


def test_terminal_ipython_prints_the_command(shared) -> None:
    import pexpect

    child = pexpect.spawn(
        os.path.join(os.path.dirname(sys.executable), "ipython"),
        ["--no-banner", "--colors=NoColor", "--simple-prompt"],
        env={**os.environ, "TERM": "dumb", "MONARCH_JUPYTER_TEST_TAG": shared.tag},
        cwd=str(shared.cwd),
        encoding="utf-8",
        timeout=120,
    )
    prompt = r"In \[\d+\]: "
    try:
        child.expect(prompt)
        child.sendline("%load_ext monarch_jupyter")
        child.expect(prompt)
        child.sendline("%remote shell --rank 1")
        child.expect(prompt)
        shown = child.before.replace("\r", "")
    finally:
        child.terminate(force=True)
    assert "a shell on rank 1 (hosts=1): run in a terminal" in shown, shown
    line = next(li.strip() for li in shown.splitlines() if "rank_shell" in li)
    assert (
        line
        == f"cd {shared.cwd} && {sys.executable} -P -m monarch_jupyter.remote.rank_shell --rank 1 --context default"
    )


def test_a_stopped_worker_is_one_line(shared) -> None:
    workers = _workers(shared)
    os.kill(workers["hosts_1"], signal.SIGSTOP)
    try:
        line = usage_error(shared.execute("%remote shell --rank 1"))
        assert f"worker hosts_1 (pid {workers['hosts_1']}) is stopped (SIGSTOP)" in line
    finally:
        os.kill(workers["hosts_1"], signal.SIGCONT)


# ── the server's route, with a real jupyter_server terminal ──────────────
def _post(server, path: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{server.url}/{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"token {server.token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


async def _type_and_read(server, name: str, text: str, answer: re.Pattern[str], timeout: float = 90) -> str:
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    url = f"ws://127.0.0.1:{server.port}/terminals/websocket/{name}"
    conn = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {server.token}"}))
    seen = ""
    typed = False
    deadline = time.monotonic() + timeout
    try:
        while not answer.search(seen) and time.monotonic() < deadline:
            try:
                message = await asyncio.wait_for(conn.read_message(), 1.0)
            except asyncio.TimeoutError:
                continue
            if message is None:
                break
            kind, *rest = json.loads(message)
            if kind == "stdout":
                seen += rest[0]
            if not typed and PROMPT.search(seen.encode()):
                conn.write_message(json.dumps(["stdin", text]))
                typed = True
    finally:
        conn.close()
    return seen


def test_the_route_opens_it_in_a_terminal_and_closing_that_ends_it(shared, tmp_path, tag) -> None:
    from browser_util import jupyter_server

    workers = _workers(shared)
    root = shared.cwd.parent
    with jupyter_server(root, tmp_path / "jupyter", tag) as server:
        status, body = _post(server, "monarch-jupyter/shell", {"path": shared.cwd.name, "rank": 5})
        assert status == 409 and "rank 5 is out of range" in body["message"], body
        status, body = _post(server, "monarch-jupyter/shell", {"path": "../x", "rank": 0})
        assert status == 400, body
        status, body = _post(server, "monarch-jupyter/shell", {"folder": str(shared.cwd), "rank": 1})
        assert status == 200, body
        name = body["name"]
        answer = re.compile(r"R=(\S*) S=(\S*) C=(\S+) P=(\d+) A=(\d+)\r?\nDONE")
        seen = asyncio.run(_type_and_read(server, name, PROBE.decode().replace("\n", "\r"), answer))
        found = answer.search(seen)
        assert found, seen[-2000:]
        assert found.group(1, 2, 3) == ("1", "2", str(shared.cwd))
        assert int(found.group(5)) == workers["hosts_1"]
        assert child_pids(workers["hosts_1"])
        server.api(f"api/terminals/{name}", method="DELETE")  # what closing the tab does
        assert poll(lambda: not child_pids(workers["hosts_1"]), timeout=20), "the shell outlived its terminal"

        # what status.json cannot know yet (a worker stopped since): said in the terminal, kept
        os.kill(workers["hosts_1"], signal.SIGSTOP)
        try:
            status, body = _post(server, "monarch-jupyter/shell", {"folder": str(shared.cwd), "rank": 1})
            assert status == 200, body
            held = re.compile(r"is stopped \(SIGSTOP\).*\r?\npress Enter to close this terminal", re.S)
            seen = asyncio.run(_type_and_read(server, body["name"], "", held))
            assert held.search(seen), seen[-2000:]
            assert "Traceback" not in seen
            assert body["name"] in {t["name"] for t in server.api("api/terminals")}, (
                "the error stays readable"
            )
        finally:
            os.kill(workers["hosts_1"], signal.SIGCONT)


def test_the_route_runs_no_planted_code_and_no_other_users_folder(shared, tmp_path, tag, second_user) -> None:
    """#42: a ``monarch_jupyter/`` planted in the folder is never imported (``-P``); a folder and
    status.json another user owns (forged from ours: same job, same ranks) open no terminal."""
    from browser_util import jupyter_server

    root = shared.cwd.parent
    marker = tmp_path / "planted-ran"
    planted = shared.cwd / "monarch_jupyter"
    planted.mkdir()
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    theirs = root / f"theirs-{tag}"
    forged = theirs / ".monarch" / "default"
    forged.mkdir(parents=True)
    status = (shared.cwd / ".monarch" / "default" / "status.json").read_text()
    (forged / "status.json").write_text(status)
    for path in (theirs, theirs / ".monarch", forged, forged / "status.json"):
        path.chmod(0o666 if path.is_file() else 0o777)
        os.chown(path, second_user.uid, second_user.gid)
    try:
        with jupyter_server(root, tmp_path / "jupyter", tag) as server:
            status_code, body = _post(server, "monarch-jupyter/shell", {"folder": str(theirs), "rank": 0})
            assert status_code == 409 and "belongs to uid" in body["message"], body
            assert "\n" not in body["message"]
            status_code, body = _post(
                server, "monarch-jupyter/shell", {"folder": str(shared.cwd), "context": "nosuch"}
            )
            assert (
                status_code == 409 and "run %job apply" in body["message"] and "%%" not in body["message"]
            ), body
            deep = "[" * 1500 + "]" * 1500
            request = urllib.request.Request(
                f"{server.url}/monarch-jupyter/shell",
                data=deep.encode(),
                method="POST",
                headers={"Authorization": f"token {server.token}", "Content-Type": "application/json"},
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=30)
            assert refused.value.code == 400, refused.value.read()[:300]
            status_code, body = _post(server, "monarch-jupyter/shell", {"folder": str(shared.cwd), "rank": 0})
            assert status_code == 200, body
            answer = re.compile(r"R=(\S*) S=(\S*) C=(\S+) P=(\d+) A=(\d+)\r?\nDONE")
            seen = asyncio.run(
                _type_and_read(server, body["name"], PROBE.decode().replace("\n", "\r"), answer)
            )
            assert answer.search(seen), seen[-2000:]
            server.api(f"api/terminals/{body['name']}", method="DELETE")
        assert not marker.exists(), "the folder's planted monarch_jupyter ran"
    finally:
        import shutil

        shutil.rmtree(planted, ignore_errors=True)
        shutil.rmtree(theirs, ignore_errors=True)


def test_a_killed_job_does_not_keep_the_client(shared) -> None:
    """Last in the module: it kills the job. The terminal closes after ``%job kill``: the stop
    of the remote shell then never answers, and the client still ends."""
    shell = Pty(_shell_command(shared, 1), shared.cwd)
    _probe(shell)
    client = poll(lambda: child_pids(shell.pid), timeout=5)
    assert client
    shared.ok("%job kill", timeout=120)
    os.kill(shell.pid, signal.SIGKILL)
    shell.wait()
    os.close(shell.fd)
    limit = 3 * rank_shell.STOP_GRACE + 10
    assert poll(lambda: not os.path.exists(f"/proc/{client[0]}"), timeout=limit), (
        "the client outlived its job"
    )
