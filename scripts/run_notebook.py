"""Execute a notebook headless in a real kernel and print its outputs as they arrive.

    python scripts/run_notebook.py notebooks/quickstart.ipynb [--save OUT.ipynb]

Each cell's source is echoed, then its streamed output, live, as the kernel
sends it (so a %%remote cell shows its ranks' lines while they run). Exits
non-zero if a cell fails.

Whatever way the run ends (the last cell, a failing cell, Ctrl-C, SIGTERM, or the reader
of its output going away, as with ``| head``), nothing it started is left running: the
kernel and every process under it (the notebook's job workers, their procs, its runs)
carry a fresh ``MONARCH_JUPYTER_NOTEBOOK_RUN`` value in their environment, and those are
stopped by PID at the end. A job the run applied and that was stopped this way has its
cache removed too, as ``%job kill`` would, so the next run (or ``%load_ext``) starts clean.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import os
import signal
import stat
import sys
import tempfile
import time
import uuid
from pathlib import Path

# Ctrl-C while the modules below load (a second or more here) stops quietly: nothing has been
# started yet. main() takes SIGINT over before it starts the kernel.
signal.signal(signal.SIGINT, lambda *_: sys.exit(130))

import nbformat  # noqa: E402
from jupyter_client import KernelManager  # noqa: E402
from nbclient import NotebookClient  # noqa: E402
from nbclient.exceptions import CellExecutionError  # noqa: E402

from monarch_jupyter.jobs import cache  # noqa: E402
from monarch_jupyter.jobs.contexts import MONARCH_DIR, STATE_FILE  # noqa: E402
from monarch_jupyter.system.orphans import stop_carrying  # noqa: E402
from monarch_jupyter.text.terminal import terminal_text  # noqa: E402

RUN_VAR = "MONARCH_JUPYTER_NOTEBOOK_RUN"  # inherited by the kernel and all it starts

DIM, BOLD, RED, RESET = "\033[2m", "\033[1m", "\033[31m", "\033[0m"


class IPCKernelManager(KernelManager):
    """A local kernel on IPC sockets in a private temp folder: no TCP ports, and no
    "Kernel is running over TCP without encryption" warning in the terminal."""

    def __init__(self, **kwargs) -> None:
        self._socket_dir = tempfile.TemporaryDirectory(prefix="monarch-nb-")
        kwargs.setdefault("transport", "ipc")
        kwargs.setdefault("ip", f"{self._socket_dir.name}/kernel")
        super().__init__(**kwargs)


class EchoingClient(NotebookClient):
    """A NotebookClient that prints every output the moment it arrives."""

    def __init__(self, *args, colour: bool = True, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._colour = colour
        self._started = time.monotonic()

    async def async_start_new_kernel(self, **kwargs):
        # nbclient answers SIGINT / SIGTERM with loop handlers that shut the kernel down under
        # the running cell (which then fails with an AssertionError traceback), and only when the
        # loop gets to them: our kernel client blocks the loop in zmq polls, so a long cell never
        # did. A plain handler raises Stopped at once, wherever the run is.
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        _take_signals()
        return await super().async_start_new_kernel(**kwargs)

    def _paint(self, code: str, text: str) -> str:
        return f"{code}{text}{RESET}" if self._colour else text

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        if cell.cell_type == "code":
            stamp = f"[{time.monotonic() - self._started:6.1f}s] In [{cell_index}]"
            print(self._paint(BOLD, stamp))
            for line in cell.source.splitlines():
                print(self._paint(DIM, f"    {line}"))
            sys.stdout.flush()
        return await super().async_execute_cell(cell, cell_index, execution_count, store_history)

    def output(self, outs, msg, display_id, cell_index):
        kind = msg["msg_type"]
        content = msg["content"]
        try:
            # remote text: colours kept, titles, clipboard writes, links and screen clears dropped
            if kind == "stream":
                text = terminal_text(content["text"], self._colour)
                sys.stdout.write(self._paint(RED, text) if content["name"] == "stderr" else text)
            elif kind in ("display_data", "execute_result") and "text/plain" in content["data"]:
                sys.stdout.write(terminal_text(content["data"]["text/plain"], self._colour) + "\n")
            elif kind == "error":
                error = terminal_text(f"{content['ename']}: {content['evalue']}", self._colour)
                sys.stdout.write(self._paint(RED, f"{error}\n"))
            sys.stdout.flush()
        except BrokenPipeError:  # nobody reads us any more (| head): stop, as SIGPIPE would
            _silence_stdout()
            raise Stopped("its output was closed") from None
        return super().output(outs, msg, display_id, cell_index)


class Stopped(KeyboardInterrupt):
    """The run was stopped from outside: Ctrl-C, SIGTERM / SIGHUP, or its output closed. A
    KeyboardInterrupt, so that asyncio lets it through from any callback (it logs and drops
    other exceptions raised there)."""


def _stop_on_signal(signum, frame) -> None:
    raise Stopped(signal.Signals(signum).name)


def _take_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop_on_signal)


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null, so the interpreter's last flush does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--save", type=Path, help="write the executed notebook here")
    parser.add_argument("--timeout", type=int, default=600, help="per-cell timeout (s)")
    args = parser.parse_args(argv)

    notebook = nbformat.read(args.notebook, as_version=4)
    run = os.environ[RUN_VAR] = uuid.uuid4().hex  # the kernel inherits it, and all it starts
    started_ns = time.time_ns() - 20_000_000  # file times lag the clock by up to a tick
    client = EchoingClient(
        notebook,
        timeout=args.timeout,
        kernel_name="python3",
        kernel_manager_class=IPCKernelManager,
        resources={"metadata": {"path": str(args.notebook.parent.resolve())}},
        colour=sys.stdout.isatty(),
    )
    stopped: Stopped | None = None
    _take_signals()
    try:
        client.execute()
    except CellExecutionError as error:
        print(f"\nnotebook failed: {str(error).splitlines()[0] if str(error) else error}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # echoing a cell's source to a closed output
        _silence_stdout()
        stopped = Stopped("its output was closed")
    except KeyboardInterrupt as error:
        stopped = error if isinstance(error, Stopped) else Stopped("SIGINT")
    except Exception as error:
        # a stop may land inside nbclient's own clean-up, which then fails in turn
        stopped = _stopped_by(error)
        if stopped is None:
            raise
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # the clean-up below runs whole
            signal.signal(sig, signal.SIG_IGN)
        left = stop_carrying(RUN_VAR, run)
        forgotten = _forget_jobs_applied_since(args.notebook.parent, started_ns) if left else []
        if stopped is not None:
            # the kernel is gone (stopped just above); nbclient's exit hook would wait forever on
            # the event loop the stop broke out of
            atexit.unregister(getattr(client, "_cleanup_kernel", lambda: None))
        if args.save:
            nbformat.write(notebook, args.save)
        if left:
            print(
                f"{args.notebook}: stopped {len(left)} processes it left running "
                "(its kernel, its job's workers and their runs)"
                + (f"; removed the cache of context {', '.join(forgotten)}" if forgotten else ""),
                file=sys.stderr,
            )
    if stopped is not None:
        print(f"\n{args.notebook}: stopped ({stopped}) before its last cell", file=sys.stderr)
        return 130
    print(f"\n{args.notebook}: all cells ran")
    return 0


def _forget_jobs_applied_since(folder: Path, since_ns: int) -> list[str]:
    """Contexts under ``folder`` whose state file was written since ``since_ns``: jobs this run
    applied, whose workers were just stopped with it. Their state files go, as ``%job kill``'s
    would (status.json is only believed next to its state file)."""
    monarch_dir = folder / MONARCH_DIR
    forgotten = []
    with cache.locked(monarch_dir, create=False):
        try:
            contexts = sorted(p for p in monarch_dir.iterdir() if p.is_dir() and not p.is_symlink())
        except OSError:
            return []
        for context in contexts:
            try:
                info = os.lstat(context / STATE_FILE)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_mtime_ns >= since_ns:
                cache.remove(context / STATE_FILE)
                forgotten.append(context.name)
    return forgotten


def _stopped_by(error: BaseException) -> Stopped | None:
    """The Stopped behind ``error`` (raised while nbclient handled it), or None."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, Stopped):
            return error
        seen.add(id(error))
        error = error.__context__ or error.__cause__
    return None


if __name__ == "__main__":
    sys.exit(main())
