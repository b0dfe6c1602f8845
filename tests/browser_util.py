"""A real JupyterLab server and Debian's Chromium (driven by Playwright) for browser tests.

The server runs in its own process group with the test's tag in its environment,
so the kernels it starts and their Monarch workers carry the tag and are reaped
by the ``tag`` fixture. ``stop()`` ends only the process group we started.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from harness import TAG_VAR

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Pop-ups that would cover the notebook in screenshots and steal clicks.
_DISABLED_PLUGINS = {
    "@jupyterlab/apputils-extension:announcements": True,
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LabServer:
    """``python -m jupyter lab`` on 127.0.0.1 with a random token, in ``root``."""

    def __init__(self, root: Path, home: Path, tag: str) -> None:
        self.root = Path(root)
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        config = home / "config"
        (config / "labconfig").mkdir(parents=True, exist_ok=True)
        (config / "labconfig" / "page_config.json").write_text(
            json.dumps({"disabledExtensions": _DISABLED_PLUGINS})
        )
        env = {
            **os.environ,
            TAG_VAR: tag,
            "PYTHONUNBUFFERED": "1",
            # A config dir of our own: no user settings, workspaces or news prompts.
            "JUPYTER_CONFIG_DIR": str(config),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "JUPYTER_PLATFORM_DIRS": "1",
        }
        self.log_path = home / "jupyterlab.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "jupyter", "lab", "--no-browser",
                "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={self.root}",
                f"--LabApp.workspaces_dir={home / 'workspaces'}",
                "--LabApp.extension_manager=readonly",  # no PyPI queries from the test server
                *(["--allow-root"] if os.geteuid() == 0 else []),
            ],
            cwd=self.root, env=env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def api(self, path: str, method: str = "GET") -> object:
        request = urllib.request.Request(
            f"{self.url}/{path.lstrip('/')}", method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}:\n{self.log()}")
            try:
                self.api("api/status")
                return
            except (OSError, urllib.error.URLError):
                time.sleep(0.2)
        raise TimeoutError(f"jupyter lab did not answer in {timeout} s:\n{self.log()}")

    def kernel_state(self, notebook: str) -> str | None:
        """The execution state of the kernel of ``notebook``'s session, per the REST API."""
        for session in self.api("api/sessions") or []:
            if session.get("path") == notebook and session.get("kernel"):
                return session["kernel"].get("execution_state")
        return None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM our process group (server and the kernels it started), then SIGKILL."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except OSError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()
