"""Ranks of a run that wait on one that failed, or in different collectives: named live; at a
stop, a session's ranks blocked in C++ kept and said, never killed (:class:`Hang`).

Distributed PyTorch breaks here first: one rank raises before a collective and the others wait
in it for a peer that never comes (gloo's default timeout is 30 minutes), or ranks call
different collectives. A session's namespace says where its main thread waits on its listener
thread (``where``), however blocked that thread is, so the cell can name the collective. Owned
by one :class:`~.drive.Drive`, on the loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..view.model import Exited, Silent
from ..view.quiet import ranks_label
from ..view.session_text import blocked_error, hang_line, mismatch_line

HANG_AFTER = 2.0  # s after a rank failed while others still run: those are named, with where they wait
WHERE_WAIT = 2.0  # longest a session's namespaces may take to say where they wait
STALL_AFTER = 10.0  # s with no output from any rank of a session cell: asked where each waits, once


class Hang:
    """What a drive says of ranks that wait (``check``, each turn of its loop) and keeps at a
    stop (``keep_blocked``); ``session``: (the job's key, the session's name), None for a
    command (no namespace to ask: its waiting ranks are named without a place)."""

    def __init__(
        self, plan: Any, session: tuple[str, str] | None, sink: Any, note: Callable[[str], None]
    ) -> None:
        self.plan = plan  # the drive's Plan (its ranks and targets)
        self.session = session
        self.sink = sink
        self.note = note  # a line for the run log
        self.failed_at: float | None = None  # when the first rank failed
        self.last_output = time.monotonic()  # when any rank last printed
        self.said = False  # the waiting ranks were named (once a run)
        self.wheres: asyncio.Task[dict[int, str]] | None = None  # rank index → where it waits
        self.stall: asyncio.Task[dict[int, str]] | None = None  # the one look of a silent cell
        self.stall_said = False

    def failed(self, now: float) -> None:
        if self.failed_at is None:
            self.failed_at = now

    def look(self, remaining: Iterable[int]) -> None:
        """Ask the session's ranks where they wait (once), e.g. as a stop begins."""
        if self.wheres is None and self.session is not None:
            self.wheres = asyncio.ensure_future(self._ask_where(sorted(remaining)))

    def cancel(self) -> None:
        for task in (self.wheres, self.stall):
            if task is not None:
                task.cancel()

    def check(
        self, now: float, remaining: set[int], outcomes: dict[int, tuple[int | None, str | None]]
    ) -> None:
        self._check_failed(now, remaining, outcomes)
        self._check_stall(now, remaining)

    def _check_failed(
        self, now: float, remaining: set[int], outcomes: dict[int, tuple[int | None, str | None]]
    ) -> None:
        """``HANG_AFTER`` s after a rank failed while others run, name them once, with where a
        session's namespaces say they wait."""
        if self.said or self.failed_at is None or not remaining or now - self.failed_at < HANG_AFTER:
            return
        self.look(remaining)
        if (
            self.wheres is not None
            and not self.wheres.done()
            and now - self.failed_at < HANG_AFTER + WHERE_WAIT
        ):
            return
        self.said = True
        waits = self.waits()
        groups: dict[str, list[int]] = {}
        for i in sorted(remaining):
            groups.setdefault(waits.get(i, ""), []).append(i)
        failed = [i for i, (rc, error) in outcomes.items() if rc or error]
        line = hang_line(
            self._label(remaining),
            self._label(failed),
            now - self.failed_at,
            {self._label(ids): where for where, ids in groups.items()},
            self.session[1] if self.session else None,
        )
        self.sink.put(Silent(tuple(sorted(remaining)), now - self.failed_at, line))
        self.note(line)

    def _check_stall(self, now: float, remaining: set[int]) -> None:
        """A session cell silent ``STALL_AFTER`` s with every rank still in it: where each waits,
        asked once; ranks in different collectives are a mismatch, said at once. Ranks all in
        one collective say nothing: they may only be slow."""
        if self.session is None or self.stall_said or self.failed_at is not None:
            return
        if self.stall is None:
            if now - self.last_output >= STALL_AFTER:
                self.stall = asyncio.ensure_future(self._ask_where(sorted(remaining)))
            return
        if not self.stall.done():
            return
        self.stall_said = True
        if self.stall.cancelled() or self.stall.exception() is not None:
            return
        waits = self.stall.result()
        line = mismatch_line(
            {self._label(ids): where for where, ids in by_place(waits).items()}, self.session[1]
        )
        if line:
            self.sink.put(Silent(tuple(sorted(waits)), now - self.last_output, line))
            self.note(line)

    def waits(self) -> dict[int, str]:
        """Where each asked rank waits, once the answer came ({} before, or when it failed)."""
        task = self.wheres
        if task is None or not task.done() or task.cancelled() or task.exception() is not None:
            return {}
        return task.result()

    def keep_blocked(
        self, duration: float, remaining: set[int], outcomes: dict[int, tuple[int | None, str | None]]
    ) -> None:
        """The session ranks still running ``STOP_WAIT`` after Ctrl-C: blocked in C++ (a
        collective, I/O), where SIGINT waits. Reported with where they wait, their namespace
        (every variable) kept; ``%remote session unblock`` frees them."""
        waits = self.waits()
        for i in sorted(remaining):
            error = blocked_error(waits.get(i))
            outcomes[i] = (None, error)
            self.note(f"{self.plan.ranks[i].label}: {error}")
            self.sink.put(Exited(i, None, duration, error))

    async def _ask_where(self, indices: list[int]) -> dict[int, str]:
        """Where each chosen rank's namespace waits: rank index → ``all_reduce (gloo) at cell line 5``."""
        if self.session is None:
            return {}
        job, name = self.session
        wanted = set(indices)
        found: dict[int, str] = {}

        async def ask(target: Any) -> None:
            values = await target.actors.session_control.call(job, name, target.mesh, {"op": "where"})
            for rank, answer, _ in values.values():
                index = target.indices.get(int(rank))
                if index in wanted and answer and answer.get("busy"):
                    found[index] = str(answer.get("where") or "")

        # tasks, not a gather: a gather cancelled with the run (a stop, the run's end) would log
        # "exception was never retrieved" into whatever cell runs next
        tasks = [asyncio.ensure_future(ask(t)) for t in self.plan.targets]
        try:
            await asyncio.wait(tasks, timeout=WHERE_WAIT)
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
                elif not task.cancelled():
                    task.exception()  # retrieved: a mesh that did not answer says nothing
        return found

    def _label(self, indices: Iterable[int]) -> str:
        return ranks_label(self.plan.ranks[i] for i in sorted(indices))


def by_place(waits: dict[int, str]) -> dict[str, list[int]]:
    """Rank indices grouped by where they wait, the cell line left out (``all_reduce (gloo)``)."""
    groups: dict[str, list[int]] = {}
    for index, where in sorted(waits.items()):
        groups.setdefault(where.split(" at cell line ")[0], []).append(index)
    return groups
