"""Execute a notebook headless in a real kernel and print its outputs as they arrive.

    python scripts/run_notebook.py notebooks/quickstart.ipynb [--save OUT.ipynb]

Each cell's source is echoed, then its streamed output, live, as the kernel
sends it (so a %%remote cell shows its ranks' lines while they run). Exits
non-zero if a cell fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from jupyter_client import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

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
        if kind == "stream":
            text = content["text"]
            sys.stdout.write(self._paint(RED, text) if content["name"] == "stderr" else text)
        elif kind in ("display_data", "execute_result"):
            sys.stdout.write(content["data"].get("text/plain", "") + "\n")
        elif kind == "error":
            sys.stdout.write(self._paint(RED, f"{content['ename']}: {content['evalue']}\n"))
        sys.stdout.flush()
        return super().output(outs, msg, display_id, cell_index)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--save", type=Path, help="write the executed notebook here")
    parser.add_argument("--timeout", type=int, default=600, help="per-cell timeout (s)")
    args = parser.parse_args(argv)

    notebook = nbformat.read(args.notebook, as_version=4)
    client = EchoingClient(
        notebook,
        timeout=args.timeout,
        kernel_name="python3",
        kernel_manager_class=IPCKernelManager,
        resources={"metadata": {"path": str(args.notebook.parent.resolve())}},
        colour=sys.stdout.isatty(),
    )
    try:
        client.execute()
    except CellExecutionError as error:
        print(f"\nnotebook failed: {str(error).splitlines()[0] if str(error) else error}", file=sys.stderr)
        return 1
    finally:
        if args.save:
            nbformat.write(notebook, args.save)
    print(f"\n{args.notebook}: all cells ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
