"""Perfetto traces of the job: ``%job profile --seconds N`` and ``with monarch_jupyter.profile():``.

A :class:`Window` opens Monarch's ``distributed_telemetry.profiler.profile``; closing it exports
the trace to ``.monarch/<context>/profile-<UTC>.pftrace`` and summarises the window from the
telemetry store: messages per actor and endpoint, spans per name. ``%job profile`` (:func:`start`)
closes it after N seconds on the owned loop and calls ``on_done`` with the finished
:class:`Profile` there (the kernel thread is free the whole time); the ``with`` form
(:class:`Block`) closes it when the block ends and shows the result in the block's cell.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...text import timefmt as _timefmt
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


class Window:
    """One open profile window: Monarch's profiler entered, the trace's path chosen."""

    def __init__(self, session: Any, seconds: float = 0.0) -> None:
        from monarch.distributed_telemetry.profiler import profile as monarch_profile

        job, state, _, context = session.running()
        self.url = query.telemetry_url(job, state)
        folder = session.layout.dir / context
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.result = Profile(folder / f"profile-{_timefmt.utc_stamp(micro=True)}.pftrace", seconds)
        self._window = monarch_profile(self.url)
        self._window.__enter__()
        self.start_us = time.time_ns() // 1000

    def finish(self) -> Profile:
        """Close the window, export the trace, summarise it (blocking: run it off the kernel's loop)."""
        result = self.result
        self._window.__exit__(None, None, None)
        log = result.path.with_suffix(".log")
        with fds_to(log):  # Monarch's exporter prints its counts on fd 1: not another cell's
            self._window.export_perfetto_trace(result.path)
        result.exported = first_line(log.read_text(errors="replace")) if log.exists() else ""
        bounds = {"start": self.start_us, "end": time.time_ns() // 1000}
        for sql in (BY_ENDPOINT, BY_SPAN):
            text = sql.format(**bounds)
            began = time.perf_counter()
            result.summary.append(QueryResult(query.fetch(self.url, text), text, time.perf_counter() - began))
        return result


def start(session: Any, seconds: float, on_done: Callable[[Profile], None]) -> Profile:
    """Open the window now and close it after ``seconds`` on the owned loop; returns at once."""
    if not 0 < seconds <= MAX_SECONDS:
        raise query.QueryError(f"--seconds must be in (0, {MAX_SECONDS}], got {seconds:g}")
    window = Window(session, seconds)
    result = window.result

    async def run() -> None:
        await asyncio.sleep(seconds)
        try:
            await asyncio.get_running_loop().run_in_executor(None, window.finish)
        except Exception as error:
            result.error = first_line(f"{type(error).__name__}: {error}")
        result.done = True
        on_done(result)

    session.loop.submit(run())
    return result


class Block:
    """``with monarch_jupyter.profile() as p:`` — the block's window; ``p`` is its :class:`Profile`,
    done (trace written, summary read) when the block ends, and shown then with ``show``."""

    def __init__(self, session: Any, show: Callable[[Profile], None] | None = None) -> None:
        self._session = session
        self._show = show
        self._window: Window | None = None

    def __enter__(self) -> Profile:
        self._window = Window(self._session)
        return self._window.result

    def __exit__(self, *exc: object) -> None:
        window, self._window = self._window, None
        if window is None:
            return
        result = window.result
        result.seconds = round(time.time() - result.started, 1)
        try:
            self._session.loop.call(window.finish)  # waited for in slices: Ctrl-C stops the wait
        except Exception as error:
            result.error = first_line(f"{type(error).__name__}: {error}")
        result.done = True
        if self._show is not None:
            self._show(result)
