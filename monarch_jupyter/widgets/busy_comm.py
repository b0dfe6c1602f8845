"""Widget requests answered while the kernel runs a cell (the grid's Stacks button, its
resources), and the front end's state updates seen then (what the grid draws).

A cell that streams a run keeps the kernel's main thread busy, and the main thread is where
ipykernel dispatches every comm message: a widget's request would be read only after the cell.
ipykernel 7 reads each shell message first on its shell-channel thread and asks the message's
comm where to route it (``comm._reply_subshell_for(data, default)``, its subshell routing);
:func:`serve_while_busy` wraps that hook so chosen requests are also handed to a thread of ours
at once, and the routing itself is left as it was. Where the hook is missing (an older
ipykernel, another kernel) nothing is wrapped: the requests are served from the main thread,
once the cell is done. Each request carries an id, so the copy the main thread reads later is
answered once only (:class:`Served`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

# ipykernel's routing hook (kernelbase.Kernel.shell_channel_thread_main, ipykernel >= 7):
# private, so read in this one place; tests/integration/test_grid_stacks.py proves it is called.
ROUTE_HOOK = "_reply_subshell_for"

Request = Mapping[str, Any]


def custom_content(data: object) -> Request | None:
    """The content of an ipywidgets custom message (``{"method": "custom", "content": …}``)."""
    if isinstance(data, Mapping) and data.get("method") == "custom":
        content = data.get("content")
        if isinstance(content, Mapping):
            return content
    return None


class Served:
    """Request ids already taken (by either path): each request is served once."""

    def __init__(self, limit: int = 1000) -> None:
        self._ids: dict[str, None] = {}
        self._lock = threading.Lock()
        self._limit = limit

    def take(self, request_id: str) -> bool:
        """True the first time ``request_id`` is seen."""
        with self._lock:
            if request_id in self._ids:
                return False
            self._ids[request_id] = None
            if len(self._ids) > self._limit:
                del self._ids[next(iter(self._ids))]
            return True


def serve_while_busy(
    comm: object,
    wanted: Callable[[Request], bool],
    serve: Callable[[Request], None],
    on_update: Callable[[Request], None] | None = None,
) -> bool:
    """Hand each custom message ``wanted`` accepts to ``serve`` on a new thread as soon as the
    kernel receives it, and each state update's changes to ``on_update`` (on the shell-channel
    thread: it must be quick). False where the kernel has no routing hook (then nothing changed)."""
    route = getattr(comm, ROUTE_HOOK, None)
    if not callable(route):
        return False

    def routed(data: Any, default: Any) -> Any:
        try:
            if on_update is not None and isinstance(data, Mapping) and data.get("method") == "update":
                changes = data.get("state")
                if isinstance(changes, Mapping):
                    on_update(changes)
            content = custom_content(data)
            if content is not None and wanted(content):
                threading.Thread(
                    target=serve, args=(content,), name="monarch-grid-request", daemon=True
                ).start()
        except Exception:  # the kernel's routing must go on whatever a request was
            pass
        return route(data, default)

    setattr(comm, ROUTE_HOOK, routed)
    return True
