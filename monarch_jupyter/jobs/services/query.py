"""SQL over a job's telemetry (Monarch's DataFusion store in the sidecar) as Arrow tables.

The sidecar's ``/api/query`` answers JSON with its keys sorted (column order lost); asked for
``application/vnd.apache.arrow.stream`` it answers an Arrow IPC stream, which keeps column
order and types. Every failure is one line (:class:`QueryError`).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from ...errors import MonarchJupyterError
from ...runtime import introspect as _introspect
from . import local_http
from .table_view import QueryResult, first_line

ARROW_STREAM = "application/vnd.apache.arrow.stream"
TIMEOUT = 30.0  # seconds: a query of a store on loopback; never wait forever
MAX_BYTES = 1 << 30  # an answer bigger than this is refused, not read into memory
TABLES_SQL = (
    "SELECT table_name, column_name, data_type FROM information_schema.columns "
    "WHERE table_schema <> 'information_schema' ORDER BY table_name, ordinal_position"
)


class QueryError(MonarchJupyterError):
    """A query failed: no telemetry, the store unreachable, or the SQL rejected (one line)."""


def telemetry_url(job: Any, state: Any) -> str:
    """The connected job's telemetry query URL; QueryError saying how to get one."""
    url = _introspect.urls(job, state).get("telemetry")
    if not url:
        raise QueryError(
            "the running job has no telemetry: %job apply --local hosts=2 --telemetry "
            "(or job.enable_telemetry() on your job) starts one with it"
        )
    return url


def fetch(url: str, sql: str, timeout: float = TIMEOUT) -> Any:
    """Run ``sql`` at ``url`` (``…/api/query``) and return its pyarrow.Table."""
    import pyarrow.ipc

    request = urllib.request.Request(
        f"{url.rstrip('/')}/api/query",
        data=json.dumps({"sql": sql}).encode(),
        headers={"Content-Type": "application/json", "Accept": ARROW_STREAM},
        method="POST",
    )
    try:
        kind, body = local_http.fetch(request, timeout, MAX_BYTES)
    except urllib.error.HTTPError as error:
        raise QueryError(_server_error(error)) from None
    except local_http.Unanswered as reason:
        raise QueryError(
            f"the telemetry store at {url} did not answer ({reason}); %job shows the job"
        ) from None
    except local_http.TooLarge:
        raise QueryError(
            f"the answer is over {MAX_BYTES >> 20} MiB: add a LIMIT or select fewer columns"
        ) from None
    if not kind.startswith(ARROW_STREAM):
        raise QueryError(f"the telemetry store answered {kind or 'no content type'}, not Arrow")
    return pyarrow.ipc.open_stream(body).read_all()


def _server_error(error: urllib.error.HTTPError) -> str:
    """The store's own message (``{"error": …}``), first line, else the HTTP status."""
    try:
        text = error.read(65536).decode("utf-8", "replace")
        message = json.loads(text).get("error") or text
    except (ValueError, AttributeError, OSError):
        message = str(error.reason)
    line = first_line(str(message))
    return line if line.startswith("SQL error") else f"SQL error: {line}"


def run(job: Any, state: Any, sql: str, call: Any = None) -> QueryResult:
    """``sql`` on the job's telemetry, timed; ``call`` runs the fetch (the owned loop's worker)."""
    if not sql.strip():
        raise QueryError("give the SQL to run, e.g. %job query SELECT * FROM actors LIMIT 5 (or --tables)")
    url = telemetry_url(job, state)
    started = time.perf_counter()
    table = call(fetch, url, sql) if call is not None else fetch(url, sql)
    return QueryResult(table, sql, time.perf_counter() - started)


def run_in(session: Any, sql: str) -> QueryResult:
    """``sql`` on the telemetry of ``session``'s running job (attaching if needed). The fetch runs
    on the calling thread: a socket read with a timeout, which Ctrl-C interrupts."""
    job, state, _, _ = session.running()
    return run(job, state, sql)


def tables_text(session: Any) -> str:
    """The telemetry tables and their columns, one table a line."""
    from . import table_view

    try:
        rows = run_in(session, TABLES_SQL).table.to_pylist()
    except QueryError as error:
        if not str(error).startswith("SQL error"):
            raise
        rows = []
    if not rows:  # no information_schema: the names alone
        names = run_in(session, "SHOW TABLES").table.to_pylist()
        return "\n".join(str(row.get("table_name")) for row in names)
    return table_view.tables_text(rows)


def to_pandas(table: Any) -> Any:
    """``table`` as a pandas DataFrame; QueryError (one line) when pandas is not installed."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise QueryError("--pandas needs pandas: pip install pandas (without it: a pyarrow.Table)") from None
    return table.to_pandas()


def query(session: Any, sql: str, pandas: bool = False) -> Any:
    """``monarch_jupyter.query``: the rows of ``sql`` as a pyarrow.Table (a DataFrame with ``pandas``)."""
    table = run_in(session, sql).table
    return to_pandas(table) if pandas else table
