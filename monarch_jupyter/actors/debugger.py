"""``breakpoint()`` in an actor, debugged from the cell that waits on the call.

A proc that stops sends a ``stopped`` record (see :mod:`.worker`); the kernel then
signals its main thread (``SIGUSR1``). Monarch's ``Future.get`` waits in Rust but
runs Python's signal handlers, so the handler runs *inside the cell's* ``get()``:
there it says which ranks stopped where, and reads commands with plain ``input()``
(ipykernel turns it into an ``input_request`` on the stdin channel; Ctrl-C raises
``KeyboardInterrupt`` in it as in any cell). Commands go to Monarch's own
``DebugController`` through the socket it serves in this process (what
``monarch debug`` connects to; :func:`loopback_only` keeps it on 127.0.0.1 and
off a fixed port); pdb output is shown with notebook frames as cell and line
(:mod:`.debug_text`).

Ctrl-C while stopped leaves the debugger: every stopped rank is told to continue
(``c``) and the call raises ``KeyboardInterrupt`` as usual (the call itself runs on,
as after any interrupted ``get()``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from ..jobs import breakpoints as stopped
from . import debug_text
from .debug_text import Command, Stop

SIGNAL = signal.SIGUSR1
RESIGNAL = 1.0  # while ranks wait and no prompt is open, the main thread is asked again this often
CONNECT_FOR = 15.0  # the controller starts with the first breakpoint: how long to wait for it
_PROMPTS = ("monarch_dbg> ", debug_text.PDB_PROMPT)


def loopback_only() -> None:
    """Monarch's debug controller (started in this process by the first breakpoint) listens on
    ``MONARCH_DEBUG_SERVER_HOST:PORT``: keep it on loopback, and on a free port rather than the
    fixed 27000 (so several kernels of a machine each have theirs)."""
    host = os.environ.get("MONARCH_DEBUG_SERVER_HOST", "")
    if host not in ("127.0.0.1", "::1"):
        os.environ["MONARCH_DEBUG_SERVER_HOST"] = "127.0.0.1"
    if "MONARCH_DEBUG_SERVER_PORT" not in os.environ:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            os.environ["MONARCH_DEBUG_SERVER_PORT"] = str(probe.getsockname()[1])


class Link:
    """A line-based conversation with Monarch's ``DebugController`` (its ``monarch debug`` port)."""

    def __init__(self, connect_for: float = CONNECT_FOR) -> None:
        host = os.environ["MONARCH_DEBUG_SERVER_HOST"]
        port = int(os.environ["MONARCH_DEBUG_SERVER_PORT"])
        deadline = time.monotonic() + connect_for
        while True:
            try:
                self.sock = socket.create_connection((host, port), timeout=1.0)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.buffer = ""
        self.read()  # the banner, up to its first prompt

    def read(self, timeout: float | None = None) -> str:
        """Text up to the controller's next prompt (pdb's or its own), prompt included."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.buffer.endswith(_PROMPTS):
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError("the debugger did not answer")
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            if not data:
                raise ConnectionError("the debug controller closed the connection")
            self.buffer += data.decode("utf-8", "replace")
        text, self.buffer = self.buffer, ""
        return text

    def ask(self, line: str, timeout: float | None = None) -> str:
        self.sock.sendall((line + "\n").encode())
        return self.read(timeout)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class Debugger:
    """The stopped ranks of this kernel, and the prompt that debugs them from the waiting cell."""

    def __init__(
        self,
        locate: debug_text.Locate,
        source: debug_text.Source,
        folder: Path | None = None,
        publish: Callable[[str], None] | None = None,
        cell_running: Callable[[], bool] = lambda: False,
    ) -> None:
        self.locate, self.source, self.folder = locate, source, folder
        self.publish = publish  # shows a line in the waiting cell from another thread
        self.cell_running = cell_running
        self.cell: int | None = None  # the kernel's running cell (its number), None between cells
        self.stops: dict[tuple[str, int], Stop] = {}
        self.cells: dict[tuple[str, int], int | None] = {}  # the cell running when each stopped
        # ranks a stopped cell freed (until the next cell): their post-mortem stop is freed too
        self.released: set[tuple[str, int]] = set()
        self.wake = threading.Event()
        self.shown: set[tuple[str, int]] = set()
        self.lock = threading.Lock()
        self.active = False
        self.link: Link | None = None
        self.main = threading.main_thread().ident
        self.code = _get_code()
        previous = signal.getsignal(SIGNAL)
        self.previous = previous if callable(previous) else None
        signal.signal(SIGNAL, self._on_signal)
        threading.Thread(target=self._nudge, name="monarch-jupyter-debug", daemon=True).start()

    # -- from the inbox thread
    def record(self, data: dict) -> None:
        stop = debug_text.stop_from(data) if data.get("kind") == "stopped" else None
        key = (str(data["actor"]), int(data["rank"]))
        with self.lock:
            self.cells.pop(key, None)
            if stop is not None:
                self.stops[key] = stop
                self.shown.discard(key)
            else:
                self.stops.pop(key, None)
            active = self.active
            freed = stop is not None and bool(stop.error) and key in self.released
        self._write_record(key, stop)
        if freed:  # a rank the stopped cell freed went on, raised and stopped again: free it too
            self.wake.set()
            return
        if stop is not None and active and self.publish is not None:
            self.publish(debug_text.stopped_line(stop, self.locate) + "  (attach " + str(stop.rank) + ")\n")
            with self.lock:
                self.shown.add(key)
        elif stop is not None:
            signal.pthread_kill(self.main, SIGNAL)  # type: ignore[arg-type]

    def _nudge(self) -> None:
        while True:
            self.wake.wait(RESIGNAL)
            self.wake.clear()
            with self.lock:
                freed = [s for k, s in self.stops.items() if k in self.released and s.error]
                if freed and not self.active:
                    self.active = True  # the main thread opens no prompt meanwhile
                    for stop in freed:
                        self.stops.pop((stop.actor, stop.rank), None)
                else:
                    freed = []
                waiting = bool(self.stops) and not self.active
            if freed:
                try:
                    self._release(freed)
                finally:
                    with self.lock:
                        self.active = False
            if waiting:
                with contextlib.suppress(Exception):
                    signal.pthread_kill(self.main, SIGNAL)  # type: ignore[arg-type]

    def _write_record(self, key: tuple[str, int], stop: Stop | None) -> None:
        if self.folder is None:
            return
        if stop is None:
            stopped.remove(self.folder, *key)
            return
        with self.lock:
            cell = self.cells.setdefault(key, self.cell)
        running = cell is not None and cell == self.cell
        where = debug_text.where(stop.frame, self.locate)
        stopped.write(self.folder, stop.actor, stop.rank, stop.label, where, cell, running, stop.error)

    # -- from the kernel's cell hooks
    def cell_started(self, number: int | None) -> None:
        self.cell = number
        with self.lock:
            self.released.clear()

    def cell_ended(self, interrupted: bool) -> None:
        """The running cell ended: its stopped ranks' records say so; a stopped (interrupted)
        cell frees every rank still held by a debugger (nothing would prompt for them)."""
        self.cell = None
        if interrupted and self.pending():
            self.release_all()
        for stop in self.pending():
            self._write_record((stop.actor, stop.rank), stop)

    # -- on the main thread
    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.previous is not None:
            self.previous(signum, frame)
        if self.active or not self.stops:
            return
        if not _waiting_in_get(frame, self.code):
            self._announce_elsewhere()  # e.g. an `await`ed call: say so; the next nudge tries again
            return
        self.active = True
        try:
            self._session()
        finally:
            with self.lock:
                self.active = False

    def pending(self) -> list[Stop]:
        with self.lock:
            return sorted(self.stops.values(), key=lambda s: (s.actor, s.rank))

    def _announce(self) -> None:
        for stop in self.pending():
            key = (stop.actor, stop.rank)
            if key not in self.shown:
                self.shown.add(key)
                print(debug_text.stopped_line(stop, self.locate), flush=True)

    def _announce_elsewhere(self) -> None:
        """Stopped ranks while the running cell waits for them some other way than ``get()``."""
        if self.publish is None or not self.cell_running():
            return
        for stop in self.pending():
            key = (stop.actor, stop.rank)
            if key not in self.shown:
                self.shown.add(key)
                line = debug_text.stopped_line(stop, self.locate)
                self.publish(
                    f"{line}  (the prompt opens in a cell waiting with .get(); %remote debug lists it)\n"
                )

    def _session(self) -> None:
        self._announce()
        try:
            if self.link is None:
                self.link = Link()
            _Prompt(self, self.link).run()
        except KeyboardInterrupt:
            self.release_all()
            raise
        except (NotImplementedError, EOFError):  # IPython's StdinNotImplementedError: no stdin here
            print(
                "monarch_jupyter: this front end sends no input (stdin): stopped ranks continue", flush=True
            )
            self.release_all()
        except (OSError, ConnectionError, TimeoutError) as error:
            print(f"monarch_jupyter: lost the debugger ({error}); stopped ranks are continued", flush=True)
            self.release_all()

    def release_all(self) -> None:
        """Tell every stopped rank to continue (best effort: Ctrl-C or a lost link)."""
        stops = self.pending()
        with self.lock:
            self.stops.clear()
            self.released.update((s.actor, s.rank) for s in stops)
        self._release(stops)
        if stops:
            print(f"debugger left: {', '.join(s.label for s in stops)} continued", flush=True)

    def _release(self, stops: list[Stop]) -> None:
        if not stops and self.link is None:
            return
        try:
            if self.link is None:  # the prompt never opened (e.g. an awaited call): connect now
                self.link = Link(connect_for=2.0)
            link = self.link
            with contextlib.suppress(TimeoutError):
                link.ask("detach", timeout=1.0)
            for stop in stops:
                link.ask(f"cast {stop.actor} ranks({stop.rank}) c", timeout=2.0)
        except (OSError, ConnectionError, TimeoutError, KeyError, ValueError):
            if self.link is not None:
                self.link.close()
            self.link = None


class _Prompt:
    """One visit of the prompt: until no rank is stopped (or ``continue``)."""

    def __init__(self, debugger: Debugger, link: Link) -> None:
        self.debugger, self.link = debugger, link
        self.current: Stop | None = None
        self.frame: Any = None

    def run(self) -> None:
        while True:
            stops = self.debugger.pending()
            if self.current is not None and self.current not in stops:
                self.current = None
            if self.current is None:
                if not stops:
                    return
                self._attach(stops[0])
                continue
            line = input(f"[{self.current.label}] (Pdb) ")
            if self._command(debug_text.parse(line)) == "leave":
                return

    def _attach(self, stop: Stop) -> None:
        if self.current is not None:
            self.link.ask("detach")
        self.current = stop
        deadline = time.monotonic() + CONNECT_FOR
        while True:  # the rank registers with the controller just after it told the kernel
            text = self.link.ask(f"attach {stop.actor} {stop.rank}")
            if debug_text.PDB_PROMPT in text or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self._show(text.split("\n", 1)[1] if text.startswith("Attached") else text)

    def _show(self, text: str) -> None:
        if text.endswith("monarch_dbg> "):  # the session ended: the rank went on
            self._ended()
            text = text[: -len("monarch_dbg> ")]
        shown, frame = debug_text.translate(text, self.debugger.locate)
        if frame is not None:
            self.frame = frame
        lines = [
            line
            for line in shown.split("\n")
            if not line.startswith(("<last pdb output", "Detaching from", "Detached from", "Attached to"))
        ]
        if any(line.strip() for line in lines):
            print("\n".join(lines).rstrip("\n"), flush=True)

    def _ended(self) -> None:
        current = self.current
        if current is not None:
            with self.debugger.lock:
                self.debugger.stops.pop((current.actor, current.rank), None)
            self.current = None

    def _go_on(self, stop: Stop) -> None:
        with self.debugger.lock:
            self.debugger.stops.pop((stop.actor, stop.rank), None)
        self.link.ask(f"cast {stop.actor} ranks({stop.rank}) c")

    def _command(self, command: Command) -> str:
        current = self.current
        assert current is not None
        if command.kind == "empty":
            return ""
        if command.kind == "help":
            print(debug_text.HELP, end="", flush=True)
        elif command.kind == "ranks":
            for stop in self.debugger.pending():
                print(debug_text.stopped_line(stop, self.debugger.locate), flush=True)
        elif command.kind == "attach":
            target = debug_text.pick(command.arg, self.debugger.pending())
            if target is None:
                print(f"no rank {command.arg} is stopped; `ranks` lists them", flush=True)
            else:
                self._attach(target)
        elif command.kind == "continue":
            self.link.ask("detach")
            self.current = None
            for stop in self.debugger.pending():
                self._go_on(stop)
            return "leave"
        elif command.kind == "pdb" and command.arg in ("c", "cont"):
            self.link.ask("detach")
            self.current = None
            self._go_on(current)
        elif command.kind in ("list", "longlist") and self._list(
            command.kind == "longlist", debug_text.span(command.arg)
        ):
            pass
        else:
            pdb_line = {"list": f"l {command.arg}".strip(), "longlist": "ll"}.get(command.kind, command.arg)
            answer = self.link.ask(pdb_line)
            self._show(debug_text.trim_stack(answer) if pdb_line in ("w", "where") else answer)
        return ""

    def _list(self, whole: bool, span: tuple[int, int] | None = None) -> bool:
        if self.frame is None:
            return False
        text = debug_text.cell_listing(self.frame, self.debugger.locate, self.debugger.source, whole, span)
        if text is not None:
            print(text, flush=True)
        return text is not None


def _get_code() -> Any:
    """The code object of Monarch's ``Future.get``: the frame a call waits in."""
    from monarch.actor import Future

    return Future.get.__code__


def _waiting_in_get(frame: FrameType | None, code: Any) -> bool:
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False
