"""``%job query``, ``%job profile``, ``%job topology``: what Monarch's job services know."""

from __future__ import annotations

from typing import Any

from ...errors import MonarchJupyterError
from .registry import Cell, arg, verb


@verb(
    "query",
    "SQL on the job's telemetry: its value is a pyarrow.Table (t = %job query ...)",
    arg("--tables", action="store_true", help="list the tables and their columns"),
    arg("--pandas", action="store_true", help="a pandas DataFrame instead"),
    arg("sql", nargs="*", metavar="SQL", help="the query, as typed (the rest of the line)"),
    description="%job query [--pandas] SQL    the rows as a pyarrow.Table (--pandas: a DataFrame)\n"
    "%job query --tables          the telemetry tables and their columns",
)
def query(cell: Cell, sql: str = "", tables: bool = False, pandas: bool = False) -> Any:
    from ..services import display as query_display
    from ..services import query as sql_query

    if tables:
        print(sql_query.tables_text(cell.session))
        return None
    result = sql_query.run_in(cell.session, sql)
    if pandas:
        frame = sql_query.to_pandas(result.table)
        print(f"({result.caption()})")
        return frame
    cell.install_query_display()
    query_display.remember(result)
    return result.table


@verb(
    "profile",
    "a Perfetto trace of the job's next N seconds, in the background (needs --telemetry)",
    arg("--seconds", type=float, default=10.0, metavar="N", help="the window (default 10)"),
)
def profile(cell: Cell, seconds: float = 10.0) -> None:
    from ..services import profile as profiles

    handle: Any = None

    def done(result: profiles.Profile) -> None:
        if handle is not None:
            handle.update(result)

    result = profiles.start(cell.session, seconds, done)
    handle = cell.display(result, display_id=True)
    if result.done:  # finished before the handle existed
        handle.update(result)


@verb(
    "topology",
    "the job's hosts, procs and actors (status, messages processed, queue, memory) from its mesh admin",
    arg("--system", action="store_true", help="Monarch's system actors too"),
    arg(
        "--stuck-after",
        type=float,
        default=30.0,
        metavar="S",
        help="flag an actor whose handler has run this many seconds (default 30)",
    ),
)
def topology(cell: Cell, system: bool = False, stuck_after: float = 30.0) -> None:
    from ..services import admin
    from ..services import topology as topo
    from ..status import RUNNING

    status = cell.session.status()
    if status.state != RUNNING:
        raise MonarchJupyterError(f"no running job in context '{status.context}': %job apply starts one")
    sample = admin.sample(status.urls, cell.topology, system, stuck_after)
    cell.topology = sample
    print(topo.text(sample))
