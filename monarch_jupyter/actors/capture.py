"""Runs in a proc: its fds 1 and 2 go to the kernel as they are written, and on as before.

Each fd is pointed at a pipe; a thread reads it, writes every byte to where the
fd went before (Monarch's own forwarding and logs see what they always saw) and
sends the decoded text, stamped with the wall-clock time it was read, to the
kernel's port. That covers ``print``, ``logging`` (its handlers write to
``sys.stderr``) and native code alike; Monarch's proc bootstrap already makes
``sys.stdout`` line-buffered, so a print needs no flush.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

_started = False
_lock = threading.Lock()


def _pump(read_fd: int, out_fd: int, stream: str, send: Callable[[dict], None], who: dict) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    while True:
        try:
            data = os.read(read_fd, 65536)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return
        stamp = time.time()
        with contextlib.suppress(OSError):
            view = memoryview(data)
            while view:
                view = view[os.write(out_fd, view) :]
        text = decoder.decode(data)
        if text:
            with contextlib.suppress(Exception):  # the kernel going away must not stop the proc
                send({"kind": "output", "stream": stream, "text": text, "time": stamp, **who})


def start(send: Callable[[dict], None], who: dict[str, Any]) -> None:
    """Tee fds 1 and 2 of this process to ``send`` (once per process)."""
    global _started
    with _lock:
        if _started:
            return
        _started = True
        for fd, stream in ((1, "out"), (2, "err")):
            with contextlib.suppress(OSError, ValueError):
                (sys.stdout if fd == 1 else sys.stderr).flush()
            saved = os.dup(fd)
            read_fd, write_fd = os.pipe()
            os.dup2(write_fd, fd)
            os.close(write_fd)
            threading.Thread(
                target=_pump,
                args=(read_fd, saved, stream, send, who),
                name=f"monarch-jupyter-{stream}",
                daemon=True,
            ).start()
