"""``%job profile --seconds N``: a Perfetto trace of the job's next N seconds, without blocking.

The window opens now (Monarch's ``distributed_telemetry.profiler.profile``); the owned loop
closes it after N seconds, exports the trace to ``.monarch/<context>/profile-<UTC>.pftrace``
(on its blocking worker) and summarises the window from the telemetry store: messages per
actor and endpoint, spans per name. ``on_done`` is called with the finished :class:`Profile`
(on the loop's thread); the kernel thread is free the whole time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import _timefmt
from ..engines.base import fds_to
from . import query
from .table_view import QueryResult, first_line

MAX_SECONDS = 3600
BY_ENDPOINT = (
    "SELECT coalesce(a.full_name, CAST(m.to_actor_id AS VARCHAR)) AS actor, m.endpoint, "
    "count(*) AS messages FROM messages m LEFT JOIN actors a ON a.id = m.to_actor_id "
    "WHERE m.timestamp_us BETWEEN {start} AND {end} GROUP BY 1, 2 ORDER BY messages DESC LIMIT 20"
)
BY_SPAN = (
    "SELECT name, target, count(*) AS spans FROM spans WHERE timestamp_us BETWEEN {start} AND {end} "
    "GROUP BY name, target ORDER BY spans DESC LIMIT 20"
)


@dataclass
class Profile:
    """One profile window: where its trace goes, and, once done, its summary or its error."""

    path: Path
    seconds: float
    started: float = field(default_factory=time.time)
    done: bool = False
    exported: str = ""  # the exporter's own first line ("Wrote N spans from …")
    error: str | None = None
    summary: list[QueryResult] = field(default_factory=list)

    def text(self) -> str:
        where = _shown(self.path)
        if not self.done:
            return f"profiling the job for {self.seconds:g} s (other cells run meanwhile); trace: {where}"
        if self.error:
            return f"%job profile: {self.error}"
        tables = "\n\n".join(result.text() for result in self.summary)
        return f"profile of {self.seconds:g} s written to {where} ({self.exported})\n\n{tables}"

    def html(self) -> str:
        import html

        if not self.done or self.error:
            return f"<pre>{html.escape(self.text())}</pre>"
        tables = "".join(result.html() for result in self.summary)
        return (
            f"<div>profile of {self.seconds:g} s: <code>{html.escape(_shown(self.path))}</code>{tables}</div>"
        )

    def _repr_html_(self) -> str:
        return self.html()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text())


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def start(session: Any, seconds: float, on_done: Callable[[Profile], None]) -> Profile:
    """Open the window now and close it after ``seconds`` on the owned loop; returns at once."""
    from monarch.distributed_telemetry.profiler import profile as monarch_profile

    if not 0 < seconds <= MAX_SECONDS:
        raise query.QueryError(f"--seconds must be in (0, {MAX_SECONDS}], got {seconds:g}")
    job, state, _, context = session.running()
    url = query.telemetry_url(job, state)
    folder = session.layout.dir / context
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    result = Profile(folder / f"profile-{_timefmt.utc_stamp(micro=True)}.pftrace", seconds)
    window = monarch_profile(url)
    window.__enter__()
    start_us = time.time_ns() // 1000

    def finish() -> None:
        window.__exit__(None, None, None)
        log = result.path.with_suffix(".log")
        with fds_to(log):  # Monarch's exporter prints its counts on fd 1: not another cell's
            window.export_perfetto_trace(result.path)
        result.exported = first_line(log.read_text(errors="replace")) if log.exists() else ""
        bounds = {"start": start_us, "end": time.time_ns() // 1000}
        for sql in (BY_ENDPOINT, BY_SPAN):
            text = sql.format(**bounds)
            began = time.perf_counter()
            result.summary.append(QueryResult(query.fetch(url, text), text, time.perf_counter() - began))

    async def run() -> None:
        await asyncio.sleep(seconds)
        try:
            await asyncio.get_running_loop().run_in_executor(None, finish)
        except Exception as error:
            result.error = first_line(f"{type(error).__name__}: {error}")
        result.done = True
        on_done(result)

    session.loop.submit(run())
    return result
