"""Drive a real IPython kernel over jupyter_client and reap the workers it starts.

Every kernel gets ``MONARCH_JUPYTER_TEST_TAG=<tag>`` in its environment. Monarch
workers inherit the kernel's environment (and their children inherit theirs), so
the processes a test started are exactly those whose environ carries its tag:
reaping kills those PIDs and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import jupyter_client

TAG_VAR = "MONARCH_JUPYTER_TEST_TAG"


@dataclass
class Output:
    t: float  # seconds since the execute request was sent
    msg_type: str
    content: dict


@dataclass
class Result:
    outputs: list[Output] = field(default_factory=list)
    error: dict | None = None
    duration: float = 0.0

    def stream(self, name: str | None = None) -> str:
        return "".join(
            o.content["text"]
            for o in self.outputs
            if o.msg_type == "stream" and (name is None or o.content["name"] == name)
        )

    @property
    def text(self) -> str:
        """Streams, plain-text displays and the error line, concatenated."""
        parts = []
        for o in self.outputs:
            if o.msg_type == "stream":
                parts.append(o.content["text"])
            elif o.msg_type in ("display_data", "execute_result", "update_display_data"):
                parts.append(o.content["data"].get("text/plain", "") + "\n")
        if self.error:
            parts.append(f"{self.error['ename']}: {self.error['evalue']}\n")
        return "".join(parts)

    @property
    def traceback(self) -> str:
        return "\n".join(self.error.get("traceback", [])) if self.error else ""


class Kernel:
    """One IPython kernel in ``cwd`` with a test tag in its environment."""

    def __init__(
        self, cwd: Path, tag: str, extra_env: dict[str, str] | None = None, kernel_name: str = "python3"
    ) -> None:
        self.cwd = Path(cwd)
        self.tag = tag
        env = {**os.environ, TAG_VAR: tag, "PYTHONUNBUFFERED": "1", **(extra_env or {})}
        # the kernel runs in ``cwd``: a relative PYTHONPATH (``PYTHONPATH=.``) would name that
        # folder there and silently import the installed package instead of this checkout
        if env.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.pathsep.join(
                os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p
            )
        self.km = jupyter_client.KernelManager(kernel_name=kernel_name)
        self.km.start_kernel(cwd=str(self.cwd), env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def execute(self, code: str, timeout: float = 120, on_output=None, on_input=None) -> Result:
        """Run ``code``; every IOPub output is stamped with its arrival time. With ``on_input``
        (prompt, result so far -> reply), the cell may ask for input on the stdin channel."""
        start = time.monotonic()
        msg_id = self.kc.execute(code, store_history=True, allow_stdin=on_input is not None)
        result = Result()
        deadline = start + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"cell did not finish in {timeout} s: {code[:80]!r}")
            if on_input is not None:
                self._answer(on_input, result)
            try:
                msg = self.kc.get_iopub_msg(timeout=min(left, 0.05 if on_input else 1.0))
            except Exception:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "status" and msg["content"]["execution_state"] == "idle":
                break
            if kind in (
                "stream",
                "display_data",
                "execute_result",
                "update_display_data",
                "error",
                "clear_output",
            ):
                out = Output(time.monotonic() - start, kind, msg["content"])
                result.outputs.append(out)
                if kind == "error":
                    result.error = msg["content"]
                if on_output is not None:
                    on_output(out)
        result.duration = time.monotonic() - start
        return result

    def _answer(self, on_input, result: Result) -> None:
        try:
            request = self.kc.get_stdin_msg(timeout=0.01)
        except Exception:
            return
        if request["msg_type"] == "input_request":
            self.kc.input(on_input(request["content"]["prompt"], result))

    def ok(self, code: str, timeout: float = 120) -> Result:
        """Execute and fail the test with the kernel's traceback on error."""
        result = self.execute(code, timeout)
        assert result.error is None, f"{code!r} failed:\n{result.traceback}"
        return result

    def restart(self) -> None:
        """Restart the kernel process (as Jupyter's "Restart kernel"), same folder and env."""
        self.km.restart_kernel(now=True)
        self.kc.wait_for_ready(timeout=60)

    def interrupt(self) -> None:
        self.km.interrupt_kernel()

    def shutdown(self) -> None:
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel(now=True)


RUN_MIME = "application/vnd.monarch.remote+json"  # a %%remote run's saved payload


def run_payload(result: Result) -> dict:
    """The run's result: the last payload sent (a run that lasts showed its grid with a payload
    of state running, which the result replaces: an update of that display, or a new output)."""
    for o in reversed(result.outputs):
        if o.msg_type in ("display_data", "update_display_data") and RUN_MIME in o.content["data"]:
            payload = o.content["data"][RUN_MIME]
            assert payload["state"] == "finished", payload
            return payload
    raise AssertionError(f"no {RUN_MIME} output in {result.text!r}")


def nbconvert_html(notebook: Path) -> Path:
    """``jupyter nbconvert --to html`` of the saved ``notebook``: the HTML file beside it."""
    subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(notebook)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return notebook.with_suffix(".html")


def new_tag() -> str:
    return uuid.uuid4().hex


def tagged_pids(tag: str) -> list[int]:
    """PIDs of live processes whose environment carries ``tag`` (never our own)."""
    needle = f"{TAG_VAR}={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry))
    return found


def child_pids(pid: int) -> list[int]:
    """PIDs of the live children of ``pid`` (their parent per /proc/N/stat)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def worker_pids(tag: str) -> list[int]:
    """Tagged Monarch worker processes (``run_worker_loop_forever``)."""
    result = []
    for pid in tagged_pids(tag):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"run_worker_loop_forever" in cmdline:
            result.append(pid)
    return result


def reap(tag: str, grace: float = 2.0) -> list[int]:
    """SIGTERM then SIGKILL every process carrying ``tag``; returns what was found."""
    found = tagged_pids(tag)
    for pid in found:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and tagged_pids(tag):
        time.sleep(0.05)
    for pid in tagged_pids(tag):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return found


@contextlib.contextmanager
def scratch_kernel(
    prefix: str, folder: Path | None = None, tag: str | None = None, kill: bool = False
) -> Iterator[Kernel]:
    """A kernel in a new temporary folder (or ``folder``): afterwards ``%job kill`` (with
    ``kill``), shut down, every process of its tag reaped and the temporary folder removed."""
    made = folder is None
    where = Path(tempfile.mkdtemp(prefix=prefix)) if folder is None else folder
    tag = tag or new_tag()
    kernel = Kernel(where, tag)
    try:
        yield kernel
    finally:
        if kill:
            with contextlib.suppress(Exception):
                kernel.execute("%job kill", timeout=60)
        try:
            kernel.shutdown()
        finally:
            reap(tag)
            if made:
                shutil.rmtree(where, ignore_errors=True)


def poll(predicate, timeout: float = 20.0, step: float = 0.05):
    """Call ``predicate`` every ``step`` s until it returns something true or ``timeout`` passes;
    its last value (falsy on a timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def usage_error(result: Result) -> str:
    """The single UsageError line a bad magic line produces (never a traceback)."""
    text = result.text
    assert "Traceback" not in text, text
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("UsageError: "), text
    return lines[0]


@contextlib.contextmanager
def job_kernel(folder: Path, meshes: str, *setup: str) -> Iterator[Kernel]:
    """A module's shared kernel in ``folder``: the extension loaded, ``%job apply --local MESHES``,
    then each ``setup`` cell; afterwards the job is killed and everything reaped."""
    folder.mkdir(parents=True, exist_ok=True)
    with scratch_kernel(folder.name, folder=folder, kill=True) as kernel:
        kernel.ok("%load_ext monarch_jupyter")
        kernel.ok(f"%job apply --local {meshes}")
        for cell in setup:
            kernel.ok(cell)
        yield kernel


# ── a second Unix user (needs root, as in CI) ─────────────────────────────
@dataclass
class OtherUser:
    """A throwaway Unix user: commands run as it with ``setpriv`` (no groups of ours)."""

    name: str
    uid: int
    gid: int

    def command(self, *args: str) -> list[str]:
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--", *args]

    def run(self, *args: str, timeout: float = 60, **kwargs):
        import subprocess

        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(self.command(*args), timeout=timeout, **kwargs)

    def pids(self) -> list[int]:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    if os.stat(f"/proc/{entry}").st_uid == self.uid:
                        found.append(int(entry))
        return found


def can_add_users() -> bool:
    return os.geteuid() == 0 and all(shutil.which(tool) for tool in ("useradd", "userdel", "setpriv"))


@contextlib.contextmanager
def other_user() -> Iterator[OtherUser]:
    """Create ``mjtest<random>`` (no home, no login); afterwards every process it runs is
    killed by PID and the user deleted, whatever happened."""
    import pwd
    import subprocess

    name = f"mjtest{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True, timeout=30
    )
    try:
        entry = pwd.getpwnam(name)
        yield OtherUser(name, entry.pw_uid, entry.pw_gid)
    finally:
        with contextlib.suppress(KeyError):
            user = OtherUser(name, pwd.getpwnam(name).pw_uid, 0)
            for _ in range(3):
                for pid in user.pids():
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                if not user.pids():
                    break
                time.sleep(0.1)
        subprocess.run(["userdel", name], timeout=30, check=False)


@contextlib.contextmanager
def held_sidecar_lock(apply_id: str) -> Iterator[str]:
    """This process holds Monarch's sidecar lock of job ``apply_id`` (as the job's sidecar does):
    the dashboard proxy then takes this process's listening ports for the sidecar's."""
    import fcntl

    from monarch_jupyter.jobs.local_records import sidecar_lock

    path = sidecar_lock(apply_id)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield path
    finally:
        os.close(fd)
        os.unlink(path)
