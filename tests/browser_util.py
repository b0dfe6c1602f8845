"""A real Jupyter server (JupyterLab, Notebook 7 or a bare ``jupyter server``) and Debian's
Chromium, for browser and server-extension tests.

``jupyter_server(root, home, ui=...)`` starts ``jupyter lab``, ``jupyter notebook`` or (``SERVER``)
``jupyter_server`` with our extension, waits until it answers and always ends it; the ``Frontend``
adapters (``LAB``, ``NOTEBOOK``) hold the few things the two UIs do differently —
the page of a notebook, how the page shows an idle kernel, how the Monarch sidebar
is opened — so the browser test is written once.

The server runs in its own process group with the test's tag (if any) in its environment,
so the kernels it starts and their Monarch workers carry the tag and are reaped
by the ``tag`` fixture. ``stop()`` ends only the process group we started (by its PID).

What every browser test needs besides: ``notebook(cells)`` (the .ipynb to open),
``chromium_page(tag)`` (a page of a headless Chromium, closed on the way out), ``run_cell``,
``wait_kernel_idle``, ``wait_until`` and the ``NEEDS_CHROMIUM`` / ``NEEDS_BUILD`` skip marks.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from daemons import descendants
from harness import TAG_VAR, poll
from monarch_jupyter.system import procfs

REPO = Path(__file__).resolve().parents[1]
# This checkout's prebuilt labextension (`cd labextension && jlpm build:prod`).
BUILT = REPO / "monarch_jupyter" / "labextension"


def jupyter_path(home: Path) -> str:
    """A JUPYTER_PATH that serves this checkout's built labextension, ahead of the copy
    `pip install` put in the virtualenv (Jupyter takes the first one it finds); the
    current JUPYTER_PATH when the checkout has no build."""
    current = os.environ.get("JUPYTER_PATH", "")
    if not (BUILT / "package.json").is_file():
        return current
    share = home / "share"
    (share / "labextensions").mkdir(parents=True, exist_ok=True)
    link = share / "labextensions" / "monarch_jupyter"
    if not link.exists():
        link.symlink_to(BUILT, target_is_directory=True)
    return os.pathsep.join(p for p in (str(share), current) if p)


CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1400, "height": 900}
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# For a browser test module's ``pytestmark``: skipped, with what to do, where a piece is missing.
NEEDS_CHROMIUM = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
)
NEEDS_BUILD = pytest.mark.skipif(
    not (BUILT / "package.json").is_file(), reason="no build: cd labextension && jlpm build:prod"
)
# JupyterLab's theme names (apputils-extension:themes), for JupyterServer(theme=...).
THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}
ARTIFACTS = REPO / "test-artifacts"


def screenshot(page: Any, *parts: str, locator: Any = None) -> Path:
    """Save a PNG of ``page`` (or of ``locator``) as test-artifacts/<parts...>.png (kept by CI
    for reading by eye); returns its path."""
    path = ARTIFACTS.joinpath(*parts).with_suffix(".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    (locator or page).screenshot(path=str(path))
    return path


def wait_theme(page: Any, theme: str, timeout_ms: float = 30_000) -> None:
    """The page has applied ``theme`` (JupyterLab sets data-jp-theme-light on <body>)."""
    light = "true" if theme == "light" else "false"
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'", timeout=timeout_ms)


def computed(page: Any, selector: str, prop: str) -> str:
    """The computed CSS ``prop`` of the first element matching ``selector`` ('' when none)."""
    return page.evaluate(
        "([s, p]) => { const e = document.querySelector(s); return e ? getComputedStyle(e)[p] : ''; }",
        [selector, prop],
    )


# Pop-ups that would cover the notebook in screenshots and steal clicks.
_DISABLED_PLUGINS = {
    "@jupyterlab/apputils-extension:announcements": True,
}


KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def code_cell(
    source: str, outputs: list[dict] | None = None, execution_count: int | None = None, id: str | None = None
) -> dict:
    """A code cell of ``source`` with ``outputs`` (none: not run yet)."""
    cell: dict = {
        "cell_type": "code",
        "execution_count": execution_count,
        "metadata": {},
        "outputs": list(outputs or []),
        "source": source,
    }
    if id is not None:
        cell["id"] = id
    return cell


def notebook(cells: Iterable[str | dict]) -> dict:
    """An nbformat 4.5 notebook on the ``python3`` kernel: a str is a code cell not run yet, a
    dict a cell as it is; a cell without an id gets ``c<index>`` (4.5 requires unique ids)."""
    built = []
    for index, cell in enumerate(cells):
        cell = code_cell(cell) if isinstance(cell, str) else dict(cell)
        cell.setdefault("id", f"c{index}")
        built.append(cell)
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}},
        "cells": built,
    }


def saved_cells(path: Path) -> list[dict]:
    """The cells of the notebook the server saved at ``path``; it writes the file in place, so a
    read that lands mid-write sees it empty or cut short: read again until it parses (5 s at most)."""
    deadline = time.monotonic() + 5
    while True:
        try:
            return json.loads(path.read_text())["cells"]
        except ValueError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Frontend:
    """What differs between the JupyterLab and Notebook 7 UIs, for the browser test."""

    name = ""
    app = ""  # the `jupyter <app>` subcommand

    def command(self) -> list[str]:
        """The server's ``python -m`` arguments."""
        return ["jupyter", self.app]

    def server_args(self, home: Path) -> list[str]:
        return []

    def notebook_url(self, path: str) -> str:
        raise NotImplementedError

    # A JS predicate: the notebook's kernel is idle as the page shows it.
    kernel_idle_js = ""

    def open_sidebar(self, page) -> None:
        """Show the Monarch sidebar panel."""
        raise NotImplementedError


class _Lab(Frontend):
    name = app = "lab"

    def server_args(self, home: Path) -> list[str]:
        return [
            f"--LabApp.workspaces_dir={home / 'workspaces'}",
            "--LabApp.extension_manager=readonly",  # no PyPI queries from the test server
        ]

    def notebook_url(self, path: str) -> str:
        return f"/lab/tree/{path}"

    # The toolbar's execution indicator and the status bar ("Python 3 (ipykernel) | Idle"):
    # both read the session context's kernel.
    kernel_idle_js = """() => {
        const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
        const bar = [...document.querySelectorAll('.jp-StatusBar-TextItem')].map(e => e.textContent);
        return indicator && indicator.dataset.status === 'idle' && bar.some(t => /\\| Idle$/.test(t));
    }"""

    def open_sidebar(self, page) -> None:
        page.locator(".jp-SideBar [data-id='monarch-jupyter-sidebar']").click()


class _Notebook(Frontend):
    name = app = "notebook"

    def server_args(self, home: Path) -> list[str]:
        return [
            f"--JupyterNotebookApp.workspaces_dir={home / 'workspaces'}",
            # JupyterLab's server extension is loaded alongside: no PyPI queries either
            "--LabApp.extension_manager=readonly",
        ]

    def notebook_url(self, path: str) -> str:
        return f"/notebooks/{path}"

    # Notebook 7 has no status bar: the toolbar's execution indicator (the circle
    # next to the kernel name) reads the session context's kernel.
    kernel_idle_js = """() => {
        const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
        return indicator && indicator.dataset.status === 'idle';
    }"""

    def open_sidebar(self, page) -> None:
        # Notebook 7 lists the left panels by caption under View → Left Sidebar
        # → "Show Monarch" ("Show Left Sidebar" in older 7.x).
        page.locator("#menu-panel .lm-MenuBar-itemLabel", has_text="View").click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^(Show )?Left Sidebar$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^(Show )?Monarch$")).click()
        page.locator("#jp-left-stack .jp-MonarchPanel").wait_for()


class _Server(Frontend):
    """A bare ``jupyter_server`` (no UI) with our server extension, for its HTTP API."""

    name = app = "server"

    def command(self) -> list[str]:
        return ["jupyter_server"]

    def server_args(self, home: Path) -> list[str]:
        return ['--ServerApp.jpserver_extensions={"monarch_jupyter._server": True}']


LAB = _Lab()
NOTEBOOK = _Notebook()
SERVER = _Server()


class JupyterServer:
    """``python -m jupyter lab|notebook`` (or ``jupyter_server``) on a free 127.0.0.1 port with
    ``token`` (default: a random one), in ``root``, this checkout first on its PYTHONPATH."""

    def __init__(
        self,
        root: Path,
        home: Path,
        tag: str | None = None,
        ui: Frontend = LAB,
        extra: tuple[str, ...] = (),
        token: str | None = None,
        theme: str = "light",
        ours: bool = True,
    ) -> None:
        """``theme``: "light" or "dark" (JupyterLab's themes, as user settings); ``ours`` False: our
        labextension and server extension disabled (a front end with a widget manager only)."""
        self.ui = ui
        self.theme = theme
        self.root = Path(root)
        self.port = free_port()
        self.token = token or secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        config = home / "config"
        (config / "labconfig").mkdir(parents=True, exist_ok=True)
        disabled = {**_DISABLED_PLUGINS, **({} if ours else {"monarch_jupyter": True})}
        (config / "labconfig" / "page_config.json").write_text(json.dumps({"disabledExtensions": disabled}))
        themes = config / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
        themes.mkdir(parents=True, exist_ok=True)
        (themes / "themes.jupyterlab-settings").write_text(json.dumps({"theme": THEMES[theme]}))
        if not ours:
            extra = (*extra, '--ServerApp.jpserver_extensions={"monarch_jupyter._server": False}')
        env = {
            **os.environ,
            **({TAG_VAR: tag} if tag else {}),
            "PYTHONUNBUFFERED": "1",
            # the server extension imported from this checkout, not the virtualenv's copy
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            # A config dir of our own: no user settings, workspaces or news prompts.
            "JUPYTER_CONFIG_DIR": str(config),
            "JUPYTER_DATA_DIR": str(home / "data"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "JUPYTER_PLATFORM_DIRS": "1",
            "JUPYTER_PATH": jupyter_path(home),
        }
        self.log_path = home / f"jupyter-{ui.app}.log"
        with open(self.log_path, "wb") as log:  # the server writes through its own copy
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    *ui.command(),
                    "--no-browser",
                    "--ServerApp.ip=127.0.0.1",
                    f"--ServerApp.port={self.port}",
                    "--ServerApp.port_retries=0",
                    f"--IdentityProvider.token={self.token}",
                    f"--ServerApp.root_dir={self.root}",
                    *ui.server_args(home),
                    *extra,
                    *(["--allow-root"] if os.geteuid() == 0 else []),
                ],
                cwd=self.root,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def api(self, path: str, method: str = "GET") -> object:
        request = urllib.request.Request(
            f"{self.url}/{path.lstrip('/')}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter {self.ui.app} exited with {self.proc.returncode}:\n{self.log()}")
            try:
                self.api("api/status")
                return
            except (OSError, urllib.error.URLError):
                time.sleep(0.2)
        raise TimeoutError(f"jupyter {self.ui.app} did not answer in {timeout} s:\n{self.log()}")

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

    def kernel_stacks(self) -> str:
        """``py-spy dump`` of every Python process the server started (its kernels): where a
        kernel that never finished its cell was stuck, printed with the log of a failing test."""
        spy = Path(sys.executable).with_name("py-spy")
        dumps = []
        below = descendants(self.proc.pid)  # the server's children (its kernels) first
        for pid in [p for p in below if "python" in (procfs.exe(p) or "")][:6]:
            try:
                done = subprocess.run(
                    [str(spy), "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=20
                )
            except (OSError, subprocess.TimeoutExpired) as error:
                dumps.append(f"pid {pid}: no dump ({error})")
                continue
            dumps.append(f"pid {pid}:\n{done.stdout or done.stderr}")
        return "\n".join(dumps)

    def stop(self) -> None:
        """SIGTERM our process group (server and the kernels it started), then SIGKILL."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


@contextlib.contextmanager
def jupyter_server(
    root: Path,
    home: Path,
    tag: str | None = None,
    ui: Frontend = LAB,
    extra: tuple[str, ...] = (),
    token: str | None = None,
    timeout: float = 60,
    theme: str = "light",
    ours: bool = True,
) -> Iterator[JupyterServer]:
    """A ``JupyterServer`` that answers; its log is printed when the block raises, and its
    process group is ended on the way out, a failing test's too."""
    server = JupyterServer(root, home, tag, ui, extra, token, theme, ours)
    try:
        server.wait_ready(timeout)
        yield server
    except Exception:
        print(f"---- jupyter {ui.app} log ----\n{server.log()}")
        print(f"---- its kernels' stacks ----\n{server.kernel_stacks()}")
        raise
    finally:
        server.stop()


@contextlib.contextmanager
def chromium(tag: str | None = None) -> Iterator[Any]:
    """Debian's Chromium, headless, through Playwright (never ``playwright install``), with
    ``tag`` in its environment so that what it leaves behind is reaped; closed on the way out."""
    from playwright import sync_api

    with sync_api.sync_playwright() as pw:
        env = {**os.environ, TAG_VAR: tag} if tag else None
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, env=env)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser: Any, timeout_ms: float = 30_000) -> Any:
    """A page of ``browser`` at ``VIEWPORT``, every wait of which gives up after ``timeout_ms``."""
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(timeout_ms)
    return page


@contextlib.contextmanager
def chromium_page(tag: str | None = None, timeout_ms: float = 30_000) -> Iterator[Any]:
    """One ``new_page`` of a ``chromium(tag)``."""
    with chromium(tag) as browser:
        yield new_page(browser, timeout_ms)


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """``predicate()``'s first truthy value within ``timeout`` s; else AssertionError naming ``what``."""
    value = poll(predicate, timeout, interval)
    if not value:
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")
    return value


def on_screen(locator: Any, check: Callable[[], Any], timeout: float, what: str) -> Any:
    """``check()``'s first truthy value, each try after scrolling ``locator`` on screen again:
    JupyterLab may scroll a reloaded notebook back to its active cell while it restores, and
    an off-screen cell (content-visibility) shows no text and cannot be clicked."""

    from playwright.sync_api import Error as PlaywrightError  # its TimeoutError too

    def attempt() -> Any:
        try:
            locator.scroll_into_view_if_needed(timeout=2000)
            return check()
        except PlaywrightError:  # scrolled away meanwhile: scroll again
            return None

    return wait_until(attempt, timeout, what, 0.2)


def wait_kernel_idle(server: JupyterServer, page: Any, notebook: str, timeout: float = 60) -> None:
    """The kernel of ``notebook``'s session is idle per the REST API *and* as the page shows it."""
    what = f"the kernel of {notebook} to be idle (api/sessions)"
    wait_until(lambda: server.kernel_state(notebook) == "idle", timeout, what, 0.25)
    page.wait_for_function(server.ui.kernel_idle_js, timeout=timeout * 1000)


def open_and_run(
    server: JupyterServer, page: Any, notebook: str, cells: int, timeout: float, query: str = ""
) -> None:
    """``notebook`` opened (``query``: e.g. ``reset&``), its kernel idle, its first ``cells`` run
    one by one, each given ``timeout`` seconds."""
    page.goto(f"{server.url}{server.ui.notebook_url(notebook)}?{query}token={server.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    wait_kernel_idle(server, page, notebook)
    for index in range(cells):
        run_cell(page, index, timeout)


def run_cell(page: Any, index: int, timeout: float = 60, wait: bool = True) -> None:
    """Select cell ``index``, run it with Shift+Enter and (``wait``) wait for its execution count."""
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Enter")
    if wait:
        wait_prompt(cell, index, timeout)


def wait_prompt(cell: Any, index: int, timeout: float) -> None:
    """Cell ``index`` (the locator ``cell``) shows an execution count, ``[N]:``, within ``timeout`` s."""
    prompt = cell.locator(".jp-InputArea-prompt")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if re.fullmatch(r"\[\d+\]:", (prompt.inner_text() or "").strip()):
            return
        time.sleep(0.1)
    raise AssertionError(f"cell {index} did not finish in {timeout} s: prompt {prompt.inner_text()!r}")
