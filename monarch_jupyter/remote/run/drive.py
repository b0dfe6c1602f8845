"""One run on the session's event loop, from its broadcast to its last event (:class:`Drive`).

A drive opens a Channel, broadcasts the command (or, following a run another kernel started,
the request to follow it) to the planned ranks and consumes their messages: it spools every
line to the run's log and hands model events (:mod:`..view.model`) to the kernel thread through a
sink. It also enforces ``--timeout``, stops the run on request (:class:`RunHandle`), and
declares a rank lost when its worker is gone (:mod:`..view.liveness`: never on silence alone; a
silent rank is reported and left running). The last event is always
:class:`~.model.Finished`; a run we started has its runs index entry written as it streams and
when it ends. What a run reaches is a :class:`Plan`, made by :mod:`.runner`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ...runtime import chatter as _chatter
from ...runtime import faults as _faults
from ...runtime import introspect as _introspect
from ...runtime import log as _log
from ...system import procfs as _procfs
from ..view import liveness
from ..view import stacks as stack_text
from ..view.model import Event, Exited, Finished, Lost, Output, RankState, Silent, Started, Stopping
from ..view.quiet import ranks_label
from ..wire.protocol import Exit, Heartbeat, Message, RunSpec, decode, spec_to_wire
from . import index
from .hang import Hang
from .index import RunEntry, Where
from .spool import Spool

if TYPE_CHECKING:
    from ...runtime.loop import EventLoopThread

STOP_WAIT = 2.5  # after a stop request, ranks get this long to report their exit
PID_CHECK = 0.25  # seconds between looks at the local workers' processes
REPORT_EVERY = 1.0  # seconds between silence lines (the ranks that fell silent meanwhile share one)
PROBE_EVERY = 5.0  # seconds between probes of a silent rank's actor
PROBE_WAIT = 30.0  # a probe not answered by then is dropped (no answer is no evidence)
WAIT = 0.05  # longest wait for a message before the checks run again
STACKS_WAIT = 8.0  # longest the stacks taken at --timeout may take (each dump is bounded too)


@dataclass
class Target:
    mesh: str
    actors: Any  # the (sliced) Monarch actor mesh to broadcast to
    indices: dict[int, int]  # flat rank → index in RunState.ranks


@dataclass
class Plan:
    """The ranks a run reaches and how (made by ``RemoteRunner.plan``)."""

    ranks: list[RankState]
    targets: list[Target]
    target: str  # e.g. "mesh hosts (2 ranks)"
    local_pids: dict[int, int | None] = field(default_factory=dict)  # rank index → worker pid
    where: Where | None = None  # None: ask the session
    apply_id: str | None = None  # the allocation the ranks run in
    proc_pids: dict[int, int] = field(default_factory=dict)  # rank index → its actor's proc pid (local)


class Sink(Protocol):
    """Where a drive puts its events (a queue read on the kernel thread)."""

    def put(self, item: Event) -> None: ...


class RunHandle:
    """The kernel thread's grip on a running drive."""

    def __init__(self, loop_thread: EventLoopThread | None) -> None:
        self._loop_thread = loop_thread
        self.future: concurrent.futures.Future[None] | None = None
        self.stop_reason: str | None = None

    def stop(self, reason: str = "interrupted") -> None:
        """Ask the drive to stop every rank (thread-safe, idempotent)."""
        if self.stop_reason is None:
            self.stop_reason = reason


class _NoSpool:
    """Following a run writes no kernel-side log: the run's files on its hosts are the log."""

    def write(self, index: int, stream: str, text: str | bytes) -> None: ...

    def note(self, line: str) -> None: ...

    def maybe_flush(self) -> None: ...

    def close(self) -> None: ...


class Drive:
    """Runs on the loop (:meth:`run`); the kernel thread only reads the sink and the handle."""

    def __init__(
        self,
        run_id: str,
        plan: Plan,
        sink: Sink,
        handle: RunHandle,
        *,
        forget: Callable[[str], None],
        spec: RunSpec | None = None,
        log_path: Path | None = None,
        timeout: float | None = None,
        entry: RunEntry | None = None,
        follow_id: str | None = None,
    ) -> None:
        self.run_id = run_id
        self.plan = plan
        self.sink = sink
        self.handle = handle
        self.forget = forget  # drop a mesh's warm actors (a rank of it was lost)
        self.spec = spec
        self.log_path = log_path
        self.timeout = timeout
        self.entry = entry  # the runs index entry (a run we start), written as it starts and ends
        self.follow_id = follow_id  # following a run (attach) rather than starting it
        self.index = {(t.mesh, flat): i for t in plan.targets for flat, i in t.indices.items()}
        self.pgids: dict[int, int] = {}
        self.outcomes: dict[int, tuple[int | None, str | None]] = {}  # rank index → (returncode, error)
        self.remaining = set(range(len(plan.ranks)))
        self.watch = liveness.SilenceWatch(self.remaining, time.monotonic())  # when each rank was heard
        self.spool: Spool | _NoSpool = _NoSpool()
        self.entry_saved = entry is None
        self.stop_at: float | None = None
        self.deadline: float | None = None
        self.faults_before = _faults.count
        self.last_pid_check = 0.0
        self.workers: dict[int, tuple[str, int | None]] = {}  # rank index → (state, pid) at the last look
        self.probe: asyncio.Task[dict[int, str]] | None = None  # rank index → why its probe failed
        self.last_probe = 0.0
        self.last_report = 0.0
        self._pending: Any = None  # the asyncio future of the next message
        self.started = time.monotonic()
        self.hang = Hang(plan, self._session(), sink, self.spool_note)

    async def run(self) -> None:
        """Drive the run to its end; whatever happens, ``Finished`` is the last event."""
        error = None
        try:
            await self._drive()
        except asyncio.CancelledError:
            error = "cancelled"
            self._abandon()
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            self._abandon()
        finally:
            if self.probe is not None:
                self.probe.cancel()
            self.hang.cancel()
            self._finish(error)

    async def _drive(self) -> None:
        from monarch.actor import Channel  # Monarch is imported with the first run, not at %load_ext

        port, receiver = Channel.open()
        reader = _introspect.PortReader(receiver)
        self._broadcast(port)
        start = self.started = time.monotonic()
        self._open_spool()  # while the ranks start: off the path of a short command
        self.watch = liveness.SilenceWatch(self.remaining, start)
        self.deadline = start + self.timeout if self.timeout else None
        self.faults_before = _faults.count
        self.last_pid_check = start
        while self.remaining:
            now = time.monotonic()
            if self._timing_out(now):
                await self._log_stacks()
                now = time.monotonic()  # messages waited meanwhile: no rank went silent
                self.watch.reset(now)
            if not self._keep_going(now):
                break
            self._check_ranks(now)
            if not self.remaining:
                break
            if self.stop_at is None and not self.follow_id:
                self.hang.check(now, self.remaining, self.outcomes)
            await self._receive(reader)
        if self._pending is not None:
            self._pending.cancel()

    def _broadcast(self, port: Any) -> None:
        wire = spec_to_wire(self.spec) if self.spec is not None else None
        for target in self.plan.targets:
            if self.follow_id:
                target.actors.follow.broadcast(self.run_id, target.mesh, self.follow_id, port)
            else:
                target.actors.run.broadcast(self.run_id, target.mesh, wire, port)

    def _open_spool(self) -> None:
        if self.log_path is None or self.spec is None:
            return
        self.spool = Spool(self.log_path, [r.label for r in self.plan.ranks])
        self.spool.note(f"%%remote {self.spec.mode} on {self.plan.target}: {self.spec.command[:200]!r}")

    # ── stop, health ───────────────────────────────────────────────────
    def _keep_going(self, now: float) -> bool:
        """Start stopping on request or ``--timeout`` (following: stop following); False once
        the loop must end (the ranks had ``STOP_WAIT`` to report their exit)."""
        if self.stop_at is not None:
            if now - self.stop_at <= STOP_WAIT:
                return True
            if self._session() is not None:  # a namespace is never killed: kept, and said so
                self.hang.keep_blocked(now - self.started, self.remaining, self.outcomes)
            else:
                for i in sorted(self.remaining):
                    self._lost(i, "did not stop in time")
            self.remaining.clear()
            return False
        reason = self.handle.stop_reason
        if reason is None and self.deadline is not None and now >= self.deadline:
            reason = self.handle.stop_reason = "timed_out"
        if reason is None:
            return True
        if self.follow_id:  # stop following; the run goes on
            self._unfollow()
            return False
        self.stop_at = now
        self.hang.look(self.remaining)  # where they wait: ready by STOP_WAIT's end
        self.sink.put(Stopping(reason))
        self.spool.note(f"stopping: {reason}")
        for target in self.plan.targets:
            target.actors.cancel.broadcast(self.run_id)
        return True

    def _timing_out(self, now: float) -> bool:
        """Whether ``--timeout`` is reached now, before the run is told to stop."""
        return (
            self.stop_at is None
            and self.handle.stop_reason is None
            and self.deadline is not None
            and now >= self.deadline
            and not self.follow_id
        )

    async def _log_stacks(self) -> None:
        """Before ``--timeout`` stops the run: what its processes are doing, into the log (a
        command that ignores SIGINT and SIGTERM is then killed, and only this says where it was)."""
        if self.spec is None or isinstance(self.spool, _NoSpool):
            return

        async def ask() -> list[Any]:
            answers: list[Any] = []
            for target in self.plan.targets:
                answers.extend((await target.actors.stacks.call(self.run_id, None, None, False)).values())
            return answers

        try:
            answers = await asyncio.wait_for(ask(), STACKS_WAIT)
        except Exception as exc:  # the stop goes on whatever the dump does
            self.spool.note(f"stacks at the timeout: not taken ({type(exc).__name__}: {exc})")
            return
        command = (self.spec.command.strip().splitlines() or [""])[0][:40]
        text = stack_text.render(self.run_id, command, stack_text.merge(answers))
        self.spool.note("stacks at the timeout (before the run was stopped):")
        for line in text.splitlines():
            self.spool.note(line)

    def _check_ranks(self, now: float) -> None:
        """Lose the ranks whose worker is gone (:func:`.liveness.lost_reason`); report the ones
        silent past the threshold, and probe them, but leave them running."""
        if _faults.count > self.faults_before:
            self.watch.fault = True
        failed = self._probe_results()
        looked = now - self.last_pid_check > PID_CHECK
        if looked:
            self.last_pid_check = now
            seen: dict[int, tuple[bool, bool]] = {}  # pid → (alive, stopped): ranks share a worker
            self.workers = {i: self._worker_state(i, seen) for i in self.remaining}
        if looked or failed:  # the evidence changed only then
            for i in sorted(self.remaining):
                why = liveness.lost_reason(self._evidence(i, failed))
                if why is not None:
                    self._lost(i, why)
                    self.remaining.discard(i)
                    self.watch.drop(i)
        silent = self.watch.silent(now)
        if not silent:
            return
        if self.probe is None and now - self.last_probe >= PROBE_EVERY:
            self.last_probe = now
            self.probe = asyncio.ensure_future(self._probe(sorted(silent)))
        if now - self.last_report >= REPORT_EVERY:  # ranks falling silent together: one line
            self.last_report = now
            self._report_silent(self.watch.due(now))

    def _worker_state(self, index: int, seen: dict[int, tuple[bool, bool]]) -> tuple[str, int | None]:
        """What this machine's /proc says of the rank's local worker and of its actor's proc,
        and the pid that says it (UNKNOWN: not local); ``seen`` keeps each pid's one look."""
        state, found = liveness.UNKNOWN, None
        for pid in (self.plan.local_pids.get(index), self.plan.proc_pids.get(index)):
            if pid is None:
                continue
            if pid not in seen:
                fields = _procfs.stat_fields(pid)
                seen[pid] = (
                    _procfs.fields_alive(fields),
                    fields is not None and fields[0] in _procfs.STOPPED_STATES,
                )
            alive, stopped = seen[pid]
            if not alive:
                return liveness.GONE, pid
            if stopped:
                state, found = liveness.STOPPED, pid
            elif state == liveness.UNKNOWN:
                state, found = liveness.ALIVE, pid
        return state, found

    def _evidence(self, index: int, failed: dict[int, str]) -> liveness.Evidence:
        worker, pid = self.workers.get(index, (liveness.UNKNOWN, None))
        return liveness.Evidence(
            worker,
            pid,
            failed.get(index),
            self.probe is not None,
            death_cause(pid) if worker == liveness.GONE and pid else "",
        )

    def _report_silent(self, due: dict[int, float]) -> None:
        """One line per group of ranks alike: ``hosts=[3,7] silent for 12 s (worker alive)``."""
        groups: dict[str, list[int]] = {}
        for i in sorted(due):
            groups.setdefault(liveness.silent_note(self._evidence(i, {})), []).append(i)
        for note, indices in groups.items():
            seconds = max(due[i] for i in indices)
            label = ranks_label(self.plan.ranks[i] for i in indices)
            line = f"{label} silent for {liveness.silent_for(seconds)} ({note})"
            self.sink.put(Silent(tuple(indices), seconds, line))
            self.spool.note(line)

    def _probe_results(self) -> dict[int, str]:
        """The finished probe's failures (rank index → why), once; {} while none finished."""
        if self.probe is None or not self.probe.done():
            return {}
        probe, self.probe = self.probe, None
        if probe.cancelled() or probe.exception() is not None:
            return {}
        return probe.result()

    async def _probe(self, indices: list[int]) -> dict[int, str]:
        """Ping each silent rank's own actor: a call that raises (a dead proc: Monarch's
        supervision) is evidence (:func:`.liveness.probe_failure`); one unanswered within
        ``PROBE_WAIT`` is not."""
        where = {i: t for t in self.plan.targets for i in t.indices.values()}
        chosen = [i for i in indices if i in where]

        async def ping(index: int) -> str | None:
            actors = where[index].actors
            if len(where[index].indices) > 1:
                sizes = dict(actors.sizes)
                actors = actors.slice(**{d: v for d, v in self.plan.ranks[index].point.items() if d in sizes})
            try:
                await asyncio.wait_for(actors.ping.call(), PROBE_WAIT)
            except Exception as exc:
                return liveness.probe_failure(type(exc).__name__, str(exc))
            return None

        answers = await asyncio.gather(*(ping(i) for i in chosen))
        return {i: why for i, why in zip(chosen, answers, strict=True) if why}

    def _lost(self, index: int, why: str) -> None:
        rank = self.plan.ranks[index]
        self.outcomes[index] = (None, why)
        self.sink.put(Lost(index, why))
        self.spool.note(f"{rank.label}: {why}")
        self.forget(rank.mesh)
        pgid = self.pgids.get(index)
        # a local job: the process group is on this machine (a session's namespace: never killed)
        if pgid and self.plan.local_pids and not self.follow_id and self._session() is None:
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)

    # ── ranks waiting on one that failed; session ranks kept at a stop ─────
    def spool_note(self, line: str) -> None:
        self.spool.note(line)

    def _session(self) -> tuple[str, str] | None:
        """(the job's key, the session's name) of a session cell; None: a command."""
        return (self.spec.session[0], self.spec.session[1]) if self.spec and self.spec.session else None

    # ── receive ────────────────────────────────────────────────────────
    async def _receive(self, reader: _introspect.PortReader) -> None:
        """Wait up to ``WAIT`` for a message, then take every one already there."""
        if self._pending is None:
            self._pending = reader.next()
        done, _ = await asyncio.wait({self._pending}, timeout=WAIT)
        if not done:
            # the entry is written once a rank streams or the run outlasts WAIT (a short run:
            # once, at its end, not between one rank's exit and the next)
            self._save_entry()
            return
        message = self._take(reader)
        self._handle(message)
        if self.remaining and type(message) is not Exit:  # it streams: not a quick run
            self._save_entry()
        while self.remaining:  # drain whatever else is ready without waiting
            self._pending = reader.next()
            await asyncio.sleep(0)
            if not self._pending.done():
                break
            self._handle(self._take(reader))
        self.spool.maybe_flush()

    def _take(self, reader: _introspect.PortReader) -> Message:
        message = decode(reader.value(self._pending.result()))
        self._pending = None
        return message

    def _save_entry(self) -> None:
        if not self.entry_saved and self.entry is not None:
            self.entry.save()
            self.entry_saved = True

    def _handle(self, message: Message) -> None:
        if message.run_id != self.run_id:
            return
        index = self.index.get((message.key, message.rank))
        if index is None or index not in self.remaining:
            return
        back = self.watch.hear(index, time.monotonic())
        if back is not None:
            self.spool.note(f"{self.plan.ranks[index].label}: heard again after {liveness.silent_for(back)}")
        if index not in self.pgids and message.pid:
            self.pgids[index] = message.pid
            self.sink.put(Started(index, message.pid))
        if isinstance(message, Heartbeat):
            return
        if message.chunks:
            self.hang.last_output = time.monotonic()
        for chunk in message.chunks:  # to the cell first, then to the log
            self.sink.put(Output(index, chunk.stream, chunk.text, chunk.newlines))
        for chunk in message.chunks:
            self.spool.write(index, chunk.stream, chunk.text)
        if isinstance(message, Exit):
            self.remaining.discard(index)
            self.watch.drop(index)
            if message.error:
                self.spool.note(f"{self.plan.ranks[index].label}: {message.error}")
            self.outcomes[index] = (message.returncode, message.error)
            if message.returncode or message.error:
                self.hang.failed(time.monotonic())
            self.sink.put(
                Exited(
                    index,
                    message.returncode,
                    message.duration,
                    message.error,
                    message.stopped_by,
                    message.value,
                )
            )

    # ── the end ────────────────────────────────────────────────────────
    def _abandon(self) -> None:
        """The drive failed: stop following, or stop the run on every rank."""
        if self.follow_id:
            self._unfollow()
            return
        for target in self.plan.targets:
            # a mesh whose workers died takes no message; its processes died with them
            with contextlib.suppress(Exception):
                target.actors.cancel.broadcast(self.run_id)

    def _unfollow(self) -> None:
        for target in self.plan.targets:
            with contextlib.suppress(Exception):
                target.actors.unfollow.broadcast(self.follow_id)

    def _finish(self, error: str | None) -> None:
        _log.get(__name__).debug(
            "run %s ended: %s, stop reason %s, error %s",
            self.run_id,
            _outcome_counts(self.outcomes),
            self.handle.stop_reason,
            error,
        )
        try:
            self.spool.close()
        except OSError as exc:  # disk full, folder removed: the output was shown, say the log is not whole
            error = error or f"could not write the log {self.log_path}: {exc}"
        self.sink.put(Finished(error))
        if self.entry is not None:  # written after the cell's reply: off the path of a short command
            self.entry.end_with(self.outcomes, self.handle.stop_reason, error, later=True)
            with contextlib.suppress(RuntimeError):  # no running loop (a test's bare call): at exit
                asyncio.get_running_loop().call_later(index.LATER, index.flush_pending)


def _outcome_counts(outcomes: dict[int, tuple[int | None, str | None]]) -> str:
    """The ranks' outcomes as ``N ranks ended, M failed``, for the debug record."""
    failed = sum(1 for rc, error in outcomes.values() if rc != 0 or error)
    return f"{len(outcomes)} ranks ended, {failed} failed"


def death_cause(pid: int) -> str:
    """How a local worker ended: its return code where this kernel started it (ProcessJob
    reaps it and logs the code: :func:`...runtime.chatter.worker_exit`), else what /proc and
    the kernel log say (:func:`...system.procfs.death_cause`); '' if unknown."""
    return _procfs.death_cause(pid, _chatter.worker_exit(pid))
