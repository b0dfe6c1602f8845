"""The ``%%remote`` / ``%remote`` magics: a thin IPython shell over :mod:`..run.runner` (runs) and
:mod:`.verbs` (``%remote VERB``). A run's events are pumped to the cell on the kernel thread
(:class:`_Pump`); the latest run's state is the magics' ``last`` (``remote.last_run()``)."""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.display import clear_output, display

from ... import remote as remote_package
from ...errors import MonarchJupyterError
from ...text.parser import ArgumentsError, HelpRequested
from ..errors import RemoteError, RemoteInterrupted
from ..view.args import RemoteArgs, RemoteVerb, help_text, parse_cell, parse_line
from ..wire.protocol import ERR, OUT
from . import verbs

if TYPE_CHECKING:  # the run's modules are imported by its first run, not at %load_ext
    from IPython.core.interactiveshell import InteractiveShell

    from ...jobs.facade import JobContext
    from ..run.drive import Plan, RunHandle
    from ..run.follow import BackgroundFollow
    from ..run.runner import RemoteRunner
    from ..run.sessions import Sessions
    from ..view.model import Event, Observer, RunState
    from ..view.render import TextRenderer

_SUMMARY = "Run a bash or Python cell on every rank of the job, streaming its output."

_NOTES = """Flags may stand before or after the mode word; `%remote -h` shows this help and
`%remote CMD -h` runs CMD -h. Each line shows as soon as it is printed, prefixed
with its rank's coordinates ([hosts=1], [hosts=1:err] for stderr); partial lines
and \\r progress bars are shown as they stand. The cell shows a bounded tail per
rank at most ~20 updates a second (past 24 ranks printing at once, 24 of them in
turn, stderr first, and a line counting the others); every line goes to a log file under
.monarch/<context>/runs/ named in the summary. Ctrl-C (interrupt) and --timeout
stop the processes on every rank (SIGINT, SIGTERM, then SIGKILL to each process
group) and keep the output so far. A non-zero return code raises RemoteError
naming the failing ranks unless --no-raise. Processes left in the background by
the command are stopped when it ends (start them with setsid to keep them).

Runs outlive the kernel: each rank's output is captured on its host (the last
64 MiB per stream), so a restart loses none of it; %remote runs lists the
context's runs, %remote attach shows a run's kept tail then streams it live, and
%remote stop (or %job kill) stops runs, processes that left the group too.

As with !cmd, IPython expands $name and {expr} in the magic's line (not in the cell
body) from notebook variables; an undefined $NAME is left for the shell, and $$NAME
always is. From Python: monarch_jupyter.remote.last_run() is the latest run's
RunState; monarch_jupyter.remote.observers receive on_event(state, event) for every
event (for live views).

Examples:
  %remote hostname
  %remote ls -la
  %%remote python --rank 0
  import os; print(os.environ["MONARCH_RANK_hosts"])
"""


def full_doc() -> str:
    """What ``%remote?`` / ``%%remote?`` show: the forms, flags and verbs, then the notes."""
    return "\n\n".join((_SUMMARY, help_text(), _NOTES))


TICK = 0.02
#: called after each step of a run shown in a cell, with a flush of what is held back (the
#: session cell's breakpoint() relay)
Watch = Callable[["RunState", Callable[[], None]], None]
SECOND_INTERRUPT_GRACE = 0.5


@magics_class
class RemoteMagics(Magics):
    """``%%remote`` / ``%remote`` in one IPython shell; the verbs' :class:`~.verbs.Cell`."""

    def __init__(self, shell: InteractiveShell, session: JobContext) -> None:
        super().__init__(shell)
        self.session = session
        self._runner: RemoteRunner | None = None
        self._sessions: Sessions | None = None
        self.observers: list[Observer] = []  # RunState observers of this instance (see remote.observers)
        self.last: RunState | None = None  # the latest run started here (monarch_jupyter.remote.last_run)
        self._followers: list[BackgroundFollow] = []  # detached runs' live grids
        self._grid_lock = threading.Lock()  # one grid request to the hosts at a time
        #: makes a detached run's live grid (``widgets.run.RunWidget``), plugged in by the composition
        #: root in a kernel with widgets; None (terminal IPython): the run's lines say it all
        self.detached_view: Callable[..., Any] | None = None

    @property
    def runner(self) -> RemoteRunner:
        """The session's ``%%remote`` runner, made (and its modules imported) on first use."""
        if self._runner is None:
            from ..run.runner import runner_for

            self._runner = runner_for(self.session)
            self._runner.on_starting = _say_starting
        return self._runner

    @runner.setter
    def runner(self, runner: RemoteRunner) -> None:  # a stand-in (benchmarks/_scale_driver.py)
        self._runner = runner

    @line_cell_magic
    def remote(self, line: str, cell: str | None = None) -> None:
        try:
            args = parse_line(line) if cell is None else parse_cell(line, cell)
        except HelpRequested as request:
            print(request.text)
            return
        except ArgumentsError as error:
            raise UsageError(str(error)) from None
        if isinstance(args, RemoteVerb):
            return self._verb(args)
        return self.run_args(args)

    def run_args(self, args: RemoteArgs) -> None:
        """Plan and run ``args`` in this cell (or start it detached)."""
        try:
            if args.session is not None:
                args = self.sessions.prepare(args)
            plan = self.runner.plan(args)
            if args.session is not None:
                self.sessions.record_target(args.session, plan.target)
        except MonarchJupyterError as error:
            raise UsageError(f"%remote: {error}") from None
        log_path = self.runner.log_path(plan)
        if args.detach:
            return self._detach(args, plan, log_path)
        try:
            return self._run(args, plan, log_path)
        finally:
            if args.session is not None:
                self.sessions.after_cell()

    @property
    def sessions(self) -> Sessions:
        """The context's sessions (``--session``), over the runner."""
        if self._sessions is None:
            from ..run.sessions import Sessions

            self._sessions = Sessions(self.session, self.runner)
        return self._sessions

    @line_magic
    def autoremote(self, line: str) -> None:
        """%autoremote on [NAME] | off: send every following cell to session NAME (default main),
        as %%remote python --session NAME would; `%autoremote off` (its own cell) stops it."""
        from .autoremote import toggle

        try:
            print(toggle(self.shell, line))
        except ArgumentsError as error:
            raise UsageError(str(error)) from None

    # %remote? asks IPython's inspector, which calls getdoc(): the help is written then, from
    # the parsers (built for it), not at %load_ext
    remote.__doc__ = _SUMMARY
    remote.__dict__["getdoc"] = full_doc

    def _verb(self, args: RemoteVerb) -> Any:
        try:
            return verbs.dispatch(self, args.verb, args.options)
        except RemoteError:  # a rank of the attached run failed: as the original cell
            raise
        except ArgumentsError as error:
            raise UsageError(str(error)) from None
        except MonarchJupyterError as error:
            raise UsageError(f"%remote {args.verb}: {error}") from None

    def _run(self, args: RemoteArgs, plan: Plan, log_path: Path) -> None:
        """A run in this cell: its lines as they come, its result at the end."""
        from ..run.drive import RunHandle
        from ..view.quiet import QuietWatch
        from ..view.render import TextRenderer

        assert plan.where is not None, "a plan from the runner says where it is recorded"
        try:
            shown_log = os.path.relpath(log_path, plan.where.root)
        except ValueError:
            shown_log = str(log_path)
        state = _run_state(args, plan, log_path, observers=self.run_observers(), log_path=shown_log)
        if args.save:
            for rank in state.ranks:
                rank.full = {OUT: [], ERR: []}
        renderer = TextRenderer(
            state,
            live=args.live,
            quiet=QuietWatch(state, args.quiet_after),
            fold=args.group,
            progress=True,
            tracebacks=True,
        )
        sink: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self.last = state
        handle = RunHandle(self.session.loop)
        try:
            self.runner.start(args, plan, sink, log_path, handle)
        except KeyboardInterrupt:
            handle.stop("interrupted")
        watch = self._debug_relay(args.session) if args.session is not None else None
        streams = _CellStreams(self.write_streams, lambda: self._result_place(state))
        interrupted = (
            _Pump(state, renderer, sink, handle, streams, watch, streams.progress).run()
            or handle.stop_reason == "interrupted"
        )
        self._end(args, state, renderer, streams)
        if args.save:
            assert self.shell is not None, "registered on a shell (register)"
            from ..view.results import RemoteResults

            self.shell.user_ns[args.save] = RemoteResults.from_state(state)
        if interrupted:
            raise RemoteInterrupted(state.summary_line() + _blocked_hint(args, state))
        message = self._failure(args, state)
        if message and not args.no_raise:
            raise RemoteError(message)

    def _end(self, args: RemoteArgs, state: RunState, renderer: TextRenderer, streams: _CellStreams) -> None:
        """The run's last lines, the texts its flags ask for, then its result, after the last line
        and each line once. Where a view of the grid drew the lines, the cell is cleared and the
        result, with the lines, is its one output. Else the lines were streamed: the result comes
        after them without them (``streamed``), and a grid that stood that no view drew
        (nbclient, a front end without our labextension) is emptied, not replaced, since it
        stands between the lines (writing them again would double them for every client that
        ignores clear_output, and the IOPub traffic)."""
        from ..view.render import group_end_text

        place = self._result_place(state)
        drawn = place is not None and place[1]
        if drawn:
            clear_output(wait=True)
        elif place is not None:
            display({"text/plain": ""}, raw=True, display_id=place[0], update=True)
        streams(renderer.finish_streams())
        streams.progress(renderer.take_progress(time.monotonic(), force=True))
        if args.group:
            self.write(group_end_text(state, renderer))
        if args.diff:
            from ..view.diff import diff_text

            self.write(diff_text(state))
        if args.session is not None:
            from ..view.session_text import values_text

            self.write(values_text([(tuple(r.point.items()), r.value) for r in state.ranks]))
        bundle = state.mime_bundle(lines=drawn, own_cell=True)
        wrote = args.group or args.diff or args.session is not None
        if not wrote and (drawn or not any(r.total_lines for r in state.ranks)):
            display_unflushed(self.shell, bundle)
        else:  # text was written: a flush in flight on the IOPub thread is waited for (result last)
            display(bundle, raw=True)
        for done in self._observer_hooks("on_result"):  # the grid is gone: its model can go
            done(state)

    def _result_place(self, state: RunState) -> tuple[str, bool] | None:
        """The display id of ``state``'s grid and whether a view of it rendered (an observer's
        ``result_place``); None where no grid was shown."""
        for place in self._observer_hooks("result_place"):
            found = place(state)
            if found is not None:
                return found
        return None

    def _observer_hooks(self, name: str) -> list[Callable[..., Any]]:
        """The run observers' methods called ``name``: a hook an observer may leave out."""
        hooks = (getattr(observer, name, None) for observer in self.run_observers())
        return [hook for hook in hooks if callable(hook)]

    def _debug_relay(self, name: str) -> Watch:
        """``breakpoint()`` in a session cell: pdb's lines asked here (the kernel's input)."""
        from ..run.sessions import DebugRelay

        return DebugRelay(self.sessions, name, input, self.write)

    @staticmethod
    def _failure(args: RemoteArgs, state: RunState) -> str | None:
        """The line the cell raises (None: every rank succeeded): who stopped the run when another
        kernel did; a session cell's errors each once, with their ranks."""
        message = state.failure_message()
        by = None
        if message and state.run_id:  # the hosts say (any engine); this machine's files, for runs it followed
            from ..host import layout as host_layout

            by = state.stopped_by or host_layout.read_stopped_by(state.run_id)
        if by and f"(kernel pid {os.getpid()})" not in by:  # stopped by another kernel
            return f"%%remote: run {state.run_id} was stopped by {by}"
        if message and args.session is not None and not state.error:
            from ..view.session_text import failure_text

            bad = [(tuple(r.point.items()), r.error, r.status) for r in state.ranks if r.failing]
            return failure_text(args.session, bad, len(state.ranks))
        return message

    def _detach(self, args: RemoteArgs, plan: Plan, log_path: Path) -> None:
        try:
            print(self.runner.start_detached(args, plan, log_path))
        except MonarchJupyterError as error:
            raise UsageError(f"%remote: {error}") from None
        # saved with the notebook, the running payload says the run was going and how to follow
        # it: the grid's own copy where there is a grid, one output either way
        state = _run_state(args, plan, log_path, observers=list(remote_package.observers))
        if not self._follow_detached(state, plan):
            display(state.running_bundle(detached=True), raw=True)

    def _follow_detached(self, state: RunState, plan: Plan) -> bool:
        """In a kernel with widgets: the detached run's live grid in this cell (with the running
        payload), fed between cells on the kernel's event loop (:mod:`..run.follow`) while the kernel
        lives. False where there is no grid (nothing displayed)."""
        kernel_loop = getattr(getattr(self.shell, "kernel", None), "io_loop", None)
        if kernel_loop is None or self.detached_view is None:
            return False  # no kernel (terminal IPython) or no widgets: the lines above say it all
        from ..run import index
        from ..run.drive import RunHandle
        from ..run.follow import BackgroundFollow, BoundedSink
        from ..view.model import Stopping

        run_id = state.run_id
        assert run_id is not None, "a run's state is made with its id"

        def stop_run() -> None:  # the grid's Stop: stop the run itself, as %remote stop does
            state.apply(Stopping("interrupted"))  # its ranks end as interrupted, as with Ctrl-C
            try:
                entries = index.load_entries(index.where(self.session).runs_dir)
                self.runner.stop_runs([index.find(entries, run_id)], by="the grid's Stop")
            except MonarchJupyterError as error:
                print(f"%remote stop {run_id}: {error}", file=sys.stderr)

        widget = self.detached_view(
            state,
            title=f"%%remote --detach {state.target} · run {run_id}",
            on_stop=stop_run,
            stacks=self.grid_stacks,
            usage=self.grid_usage,
        )
        widget.detached = True
        display_id = f"monarch-run-{run_id}"
        state.observers += [widget, _ResultWhenDone(display_id, widget.close)]
        display(widget.grid_bundle(state), raw=True, display_id=display_id)
        sink = BoundedSink()
        handle = RunHandle(self.session.loop)
        follower = BackgroundFollow(state, sink, handle, kernel_loop.call_later)
        self.runner.follow(run_id, plan, sink, handle)
        self._followers = [f for f in self._followers if not f.state.finished] + [follower]
        follower.start()
        return True

    # ── the grid's requests: on a thread of the grid's, possibly while a cell runs ──
    def grid_stacks(self, run_id: str, ranks: list[int]) -> str:
        """A grid's Stacks button: these flat ranks' stacks, folded (``%remote stacks``)."""
        with self._grid_lock:
            return verbs.grid_stacks(self.session, self.runner, run_id, ranks)

    def grid_usage(self, run_id: str) -> list[dict[str, Any]]:
        """A visible grid's resources: the run's per-rank samples, idle ranks flagged."""
        with self._grid_lock:
            return verbs.grid_usage(self.runner, run_id)

    # ── the verbs' Cell ────────────────────────────────────────────────
    def run_observers(self) -> list[Observer]:
        return [*remote_package.observers, *self.observers]

    def pump(
        self,
        state: RunState,
        renderer: TextRenderer,
        sink: queue.SimpleQueue[Event],
        handle: RunHandle,
        watch: Watch | None = None,
    ) -> bool:
        """Apply events and write coalesced output until the run finished (``watch(state)`` after
        each step); True if interrupted."""
        return _Pump(state, renderer, sink, handle, self.write_streams, watch).run()

    @staticmethod
    def write(text: str) -> None:
        if text:
            sys.stdout.write(text)
            sys.stdout.flush()

    @staticmethod
    def write_streams(parts: list[tuple[str, str]]) -> None:
        """Each part to its stream, in order: a rank's stderr lines to the cell's stderr."""
        for stream, text in parts:
            out = sys.stderr if stream == ERR else sys.stdout
            out.write(text)
            out.flush()

    @staticmethod
    def display(bundle: dict[str, Any]) -> None:
        display(bundle, raw=True)

    @property
    def user_ns(self) -> dict[str, Any]:
        assert self.shell is not None, "registered on a shell (register)"
        return self.shell.user_ns


class _CellStreams:
    """The cell's streamed lines: written as they come, silent once a view of the run's grid
    says it draws them (one live view per cell)."""

    def __init__(
        self,
        write: Callable[[list[tuple[str, str]]], None],
        place: Callable[[], tuple[str, bool] | None],
    ) -> None:
        self._write = write
        self._place = place

        self._progress_id: str | None = None  # the display of the cell's progress lines, once shown
        self._progress_shown = False  # whether it holds lines now

    def __call__(self, parts: list[tuple[str, str]]) -> None:
        if not parts:
            return
        place = self._place()
        if place is None or not place[1]:
            self._write(parts)

    def progress(self, text: str | None) -> None:
        """The ranks' \r-rewritten lines (tqdm, Keras), one per rank, in one display updated in
        place (``update_display_data``: JupyterLab, Notebook and nbclient's saved copy all apply
        it; a terminal-style \r on the stream rewrites only the cell's last line, not N ranks').
        None: unchanged; '' at the end, once every bar's final line went to the stream."""
        if text is None or (self._progress_id is None and not text):
            return
        place = self._place()
        if place is not None and place[1]:  # a view of the grid draws the run, bars in its tiles
            if self._progress_id is not None and self._progress_shown:
                display({"text/plain": ""}, raw=True, display_id=self._progress_id, update=True)
                self._progress_shown = False  # emptied once: shown before the view drew
            return
        self._progress_shown = bool(text)
        bundle = {"text/plain": text}
        if self._progress_id is None:
            import uuid

            self._progress_id = uuid.uuid4().hex
            display(bundle, raw=True, display_id=self._progress_id)
        else:
            display(bundle, raw=True, display_id=self._progress_id, update=True)


@dataclass(eq=False)
class _Pump:
    """Applies a run's events and writes coalesced output until the run finished. Ctrl-C stops
    the run (a second one stops waiting for it); it is read between events (:class:`_CtrlC`)."""

    state: RunState
    renderer: TextRenderer
    sink: queue.SimpleQueue[Event]
    handle: RunHandle
    write: Callable[[list[tuple[str, str]]], None]
    watch: Watch | None = None
    progress: Callable[[str | None], None] | None = None  # the progress lines' display (_CellStreams)
    interrupted: bool = field(default=False, init=False)
    give_up_at: float | None = field(default=None, init=False)

    def run(self) -> bool:
        seen = 0
        with _CtrlC() as ctrl_c:
            while not self.state.finished:
                try:
                    if ctrl_c.count > seen:
                        seen = ctrl_c.count
                        raise KeyboardInterrupt
                    self._step()
                except KeyboardInterrupt:
                    self._interrupted()
        return self.interrupted

    def _step(self) -> None:
        self._apply_batch(self._next_event())
        now = time.monotonic()
        self.write(self.renderer.flush_streams(now))
        if self.progress is not None:
            self.progress(self.renderer.take_progress(now))
        if self.watch is not None:
            self.watch(self.state, self._flush_now)
        for observer in self.state.observers:
            tick = getattr(observer, "on_tick", None)
            if tick is not None:
                tick(self.state)
        if self.give_up_at is not None and time.monotonic() > self.give_up_at:
            from ..view.model import Finished

            self.state.apply(Finished("stopped waiting after a second interrupt"))

    def _flush_now(self) -> None:
        """Every line held back, written now (before the cell asks for input)."""
        self.write(self.renderer.flush_streams(time.monotonic(), force=True))

    def _next_event(self) -> Event | None:
        """The next event within ``TICK``; None when there is none yet."""
        try:
            return self.sink.get(timeout=TICK)
        except queue.Empty:
            pass
        future = self.handle.future
        if future is None or not future.done():
            return None
        try:  # its Finished may have landed just after the timeout
            return self.sink.get_nowait()
        except queue.Empty:  # the drive ended without telling (it always should)
            from ..view.model import Finished

            exc = future.exception() if not future.cancelled() else None
            self.state.apply(Finished(f"the run ended unexpectedly: {exc}"))
            return None

    def _apply_batch(self, event: Event | None) -> None:
        """Apply ``event`` and those already waiting, for at most ``TICK``."""
        deadline = time.monotonic() + TICK
        while event is not None:
            _apply(self.state, self.renderer, event)
            if self.state.finished or time.monotonic() > deadline:
                return
            try:
                event = self.sink.get_nowait()
            except queue.Empty:
                return

    def _interrupted(self) -> None:
        if not self.interrupted:
            self.interrupted = True
            self.handle.stop("interrupted")
        elif self.give_up_at is None:
            self.give_up_at = time.monotonic() + SECOND_INTERRUPT_GRACE


class _CtrlC:
    """While the pump runs, Ctrl-C (SIGINT) is counted rather than raised: a KeyboardInterrupt
    can land between any two steps, e.g. after an event was applied and before its lines were
    queued for the cell, and those lines were lost from the cell. Only on the main thread with
    Python's own handler in place (as in a kernel); elsewhere it is raised at once."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: Callable[[int, FrameType | None], Any] | int | None = None  # signal's handler

    def __enter__(self) -> _CtrlC:
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self._previous = signal.signal(signal.SIGINT, self._count)
        return self

    def _count(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None


def _apply(state: RunState, renderer: TextRenderer, event: Event) -> None:
    """``renderer.add(state.apply(event))``, where a Ctrl-C landing between the two (or in the
    add) does not drop the event's lines from the cell: the add is finished, then the interrupt
    goes on."""
    fed = state.apply(event)
    try:
        renderer.add(fed)
    except KeyboardInterrupt:
        renderer.add(fed, only_missing=True)
        raise


def _say_starting() -> None:
    """At once, where a run waits for its ranks' actors (a first run on a fresh job): one line,
    not an empty output for seconds. Flushed: the kernel thread blocks in the spawn next."""
    print("starting the ranks…", flush=True)


class _ResultWhenDone:
    """A detached run's observer: when the run ends, its result replaces the grid's output (by
    display id, from whichever cell is current), so the saved notebook says how it ended, not
    that it may have ended since; then the grid's model is closed (``done``)."""

    def __init__(self, display_id: str, done: Callable[[], None]) -> None:
        self.display_id = display_id
        self._done: Callable[[], None] | None = done

    def on_event(self, state: RunState, _event: object) -> None:
        done = self._done
        if state.finished and done is not None:
            display(state.mime_bundle(), raw=True, display_id=self.display_id, update=True)
            self._done = None
            done()


def display_unflushed(shell: Any, bundle: dict[str, Any]) -> None:
    """``display(bundle, raw=True)``, without ipykernel first flushing stdout and stderr when
    neither holds anything: each flush is a round trip with the kernel's IOPub thread, most of
    the display's cost. Pending output is flushed as usual, so it still comes first."""
    publisher = getattr(shell, "display_pub", None)
    pending = any(getattr(stream, "_flush_pending", True) is not False for stream in (sys.stdout, sys.stderr))
    if pending or publisher is None or "_flush_streams" in vars(publisher):
        display(bundle, raw=True)
        return
    # shadows ipykernel's method for this one call (pinned: tests/unit/test_ipykernel_pins.py)
    publisher._flush_streams = _nothing  # noqa: SLF001
    try:
        display(bundle, raw=True)
    finally:
        del publisher._flush_streams  # noqa: SLF001


def _nothing() -> None:
    pass


def _run_state(
    args: RemoteArgs, plan: Plan, log: Path, observers: list[Observer], log_path: str | None = None
) -> RunState:
    """The run model of a run about to start (its id is the log file's stem)."""
    from ..view.model import RunState

    return RunState(
        command=args.command,
        mode=args.mode,
        target=plan.target,
        ranks=plan.ranks,
        started=time.time(),
        log_path=log_path,
        observers=observers,
        run_id=log.stem,
    )


#: what the first ``%%remote`` run imports (not ``%load_ext``), preloaded in the background
RUN_MODULES = tuple(f"{__package__}.{name}" for name in ("runner", "render", "quiet"))


def _blocked_hint(args: RemoteArgs, state: RunState) -> str:
    """A session's way out when Ctrl-C left ranks blocked in C++ ('' otherwise)."""
    if args.session is None:
        return ""
    from ..view.session_text import blocked_hint

    return blocked_hint(args.session, [rank.error for rank in state.ranks])


def register(ipython: InteractiveShell, session: JobContext) -> RemoteMagics:
    """Register ``%%remote`` / ``%remote`` on ``ipython`` (called by the composition root, which
    plugs the live views in); the instance :func:`~monarch_jupyter.remote.last_run` asks."""
    magics = RemoteMagics(ipython, session)
    ipython.register_magics(magics)
    remote_package.registered = magics
    return magics


def current() -> RemoteMagics | None:
    """The magics registered last in this process (the kernel's), or None before ``%load_ext``."""
    return remote_package.registered
