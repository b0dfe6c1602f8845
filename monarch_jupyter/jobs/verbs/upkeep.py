"""``%job reconnect``, ``refresh``, ``trust``, ``debug``: keeping the connection, the mounts,
the cache's signature and the log switch right."""

from __future__ import annotations

import os

from .registry import Cell, arg, verb


@verb("reconnect", "drop connections and re-attach from the cache")
def reconnect(cell: Cell) -> None:
    from .. import formatting

    print(formatting.attach_line(cell.session.reconnect()))


@verb("refresh", "re-sync the job's --mount folders on the workers with their sources (edits show up)")
def refresh(cell: Cell) -> None:
    count = cell.session.refresh_mounts()
    print(f"refreshed {count} mount(s): the workers see the sources as they are now")


@verb(
    "trust",
    "accept a cache your kernels did not write (e.g. `monarch apply` in a terminal): "
    "shows its owner and time, signs it, attaches",
)
def trust(cell: Cell) -> None:
    from .. import formatting

    path = os.path.relpath(cell.session.store.state_path(), cell.session.root)
    what, status = cell.session.trust()
    print(f"trusted {path} ({what}): signed as yours")
    print(formatting.attach_line(status))


@verb(
    "debug",
    "show monarch_jupyter's and Monarch's log records in the cells (on), or stop (off)",
    arg("name", nargs="?", choices=("on", "off"), metavar="on|off", help="default: on"),
)
def debug(cell: Cell, name: str | None = None) -> None:
    from ...runtime import log as _log

    on = name != "off"
    _log.set_debug(on)
    if on:
        print(
            f"monarch_jupyter: showing monarch_jupyter's and Monarch's log records (%job debug off stops; "
            f"%env {_log.DEBUG_VAR}=1 before %load_ext turns it on at load)"
        )
    else:
        print("monarch_jupyter: log records hidden again")
