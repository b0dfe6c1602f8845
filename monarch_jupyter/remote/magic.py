"""The ``%%remote`` / ``%remote`` magics: a thin shell over :mod:`.runner`."""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

from .. import remote as remote_package
from ..errors import MonarchJupyterError
from ..magic_parser import ArgumentsError, HelpRequested
from . import runs
from .args import RemoteVerb, help_text, parse_cell, parse_line
from .model import ERR, OUT, Finished, RemoteResults, RunState, Stopping
from .render import TextRenderer, group_text
from .runner import RemoteError, RemoteInterrupted, RunHandle, runner_for

_last: list = []  # the latest RunState (see monarch_jupyter.remote.last_run)

_SUMMARY = "Run a bash or Python cell on every rank of the job, streaming its output."

_NOTES = """Flags may stand before or after the mode word; `%remote -h` shows this help and
`%remote CMD -h` runs CMD -h. Each line shows as soon as it is printed, prefixed
with its rank's coordinates ([hosts=1], [hosts=1:err] for stderr); partial lines
and \\r progress bars are shown as they stand. The cell shows a bounded tail per
rank at most ~20 updates a second; every line goes to a log file under
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

TICK = 0.02
SECOND_INTERRUPT_GRACE = 0.5


@magics_class
class RemoteMagics(Magics):
    def __init__(self, shell: Any, session: Any) -> None:
        super().__init__(shell)
        self.session = session
        self.runner = runner_for(session)
        self.observers: list[Any] = []  # RunState observers of this instance (see remote.observers)

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
            return runs.dispatch(self, args.verb, args.options)
        try:
            plan = self.runner.plan(args)
        except MonarchJupyterError as error:
            raise UsageError(f"%remote: {error}") from None
        log_path = self.runner.log_path(plan)
        if args.detach:
            try:
                print(runs.start_detached(self.session, self.runner, args, plan, log_path))
            except MonarchJupyterError as error:
                raise UsageError(f"%remote: {error}") from None
            # saved with the notebook, this says the run was going and how to follow it
            state = _run_state(args, plan, log_path, observers=list(remote_package.observers))
            display(state.running_bundle(), raw=True)
            self._follow_detached(state, plan)
            return
        try:
            shown_log = os.path.relpath(log_path, plan.where.root)
        except ValueError:
            shown_log = str(log_path)
        state = _run_state(
            args, plan, log_path, observers=[*remote_package.observers, *self.observers], log_path=shown_log
        )
        if args.save:
            for rank in state.ranks:
                rank.full = {OUT: [], ERR: []}
        renderer = TextRenderer(state, live=args.live)
        sink: queue.SimpleQueue = queue.SimpleQueue()
        _last[:] = [state]
        handle = RunHandle(self.session.loop)
        try:
            self.runner.start(args, plan, sink, log_path, handle)
        except KeyboardInterrupt:
            handle.stop("interrupted")
        interrupted = self._pump(state, renderer, sink, handle) or handle.stop_reason == "interrupted"
        self._write(renderer.finish())
        if args.group:
            self._write(group_text(state))
        display_unflushed(self.shell, state.mime_bundle())
        if args.save:
            self.shell.user_ns[args.save] = RemoteResults.from_state(state)
        if interrupted:
            raise RemoteInterrupted(state.summary_line())
        message = state.failure_message()
        if message and not args.no_raise:
            raise RemoteError(message)

    remote.__doc__ = "\n\n".join((_SUMMARY, help_text(), _NOTES))

    def _pump(self, state: RunState, renderer: TextRenderer, sink: queue.SimpleQueue, handle: Any) -> bool:
        """Apply events and write coalesced output until the run finished. Ctrl-C stops the run
        (a second one stops waiting for it); it is read between events (:class:`_CtrlC`)."""
        interrupted = False
        give_up_at = None
        seen = 0
        with _CtrlC() as ctrl_c:
            while not state.finished:
                try:
                    if ctrl_c.count > seen:
                        seen = ctrl_c.count
                        raise KeyboardInterrupt
                    try:
                        event = sink.get(timeout=TICK)
                    except queue.Empty:
                        event = None
                        if handle.future is not None and handle.future.done():
                            try:  # its Finished may have landed just after the timeout
                                event = sink.get_nowait()
                            except queue.Empty:  # the drive ended without telling (it always should)
                                exc = handle.future.exception() if not handle.future.cancelled() else None
                                state.apply(Finished(f"the run ended unexpectedly: {exc}"))
                    deadline = time.monotonic() + TICK
                    while event is not None:
                        _apply(state, renderer, event)
                        if state.finished or time.monotonic() > deadline:
                            break
                        try:
                            event = sink.get_nowait()
                        except queue.Empty:
                            event = None
                    self._write(renderer.flush(time.monotonic()))
                    for observer in state.observers:
                        tick = getattr(observer, "on_tick", None)
                        if tick is not None:
                            tick(state)
                    if give_up_at is not None and time.monotonic() > give_up_at:
                        state.apply(Finished("stopped waiting after a second interrupt"))
                except KeyboardInterrupt:
                    if not interrupted:
                        interrupted = True
                        handle.stop("interrupted")
                    elif give_up_at is None:
                        give_up_at = time.monotonic() + SECOND_INTERRUPT_GRACE
        return interrupted

    def _follow_detached(self, state: RunState, plan: Any) -> None:
        """In a kernel with widgets: the detached run's live grid in this cell, fed between
        cells on the kernel's event loop (:mod:`.follow`) while the kernel lives."""
        from ..widgets import in_widget_kernel

        kernel_loop = getattr(getattr(self.shell, "kernel", None), "io_loop", None)
        if kernel_loop is None or not in_widget_kernel(self.shell):
            return  # no kernel (terminal IPython) or no widgets: the lines above say it all
        from ..widgets.run import RunWidget
        from .follow import BackgroundFollow, BoundedSink

        run_id = state.run_id

        def stop_run() -> None:  # the grid's Stop: stop the run itself, as %remote stop does
            state.apply(Stopping("interrupted"))  # its ranks end as interrupted, as with Ctrl-C
            try:
                runs.stop(self.session, self.runner, [runs.find(runs.load_entries(self.session), run_id)])
            except MonarchJupyterError as error:
                print(f"%remote stop {run_id}: {error}", file=sys.stderr)

        widget = RunWidget(state, title=f"%%remote --detach {state.target} · run {run_id}", on_stop=stop_run)
        widget.detached = True
        state.observers.append(widget)
        display(widget)
        sink = BoundedSink()
        handle = RunHandle(self.session.loop)
        follower = BackgroundFollow(state, sink, handle, kernel_loop.call_later)
        self.runner.follow(run_id, plan, sink, handle)
        self._followers = [f for f in getattr(self, "_followers", []) if not f.state.finished] + [follower]
        follower.start()

    @staticmethod
    def _write(text: str) -> None:
        if text:
            sys.stdout.write(text)
            sys.stdout.flush()


class _CtrlC:
    """While the pump runs, Ctrl-C (SIGINT) is counted rather than raised: a KeyboardInterrupt
    can land between any two steps, e.g. after an event was applied and before its lines were
    queued for the cell, and those lines were lost from the cell. Only on the main thread with
    Python's own handler in place (as in a kernel); elsewhere it is raised as before."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: Any = None

    def __enter__(self) -> _CtrlC:
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self._previous = signal.signal(signal.SIGINT, self._count)
        return self

    def _count(self, signum: int, frame: Any) -> None:
        self.count += 1

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None


def _apply(state: RunState, renderer: TextRenderer, event: Any) -> None:
    """``renderer.add(state.apply(event))``, where a Ctrl-C landing between the two (or in the
    add) does not drop the event's lines from the cell: the add is finished, then the interrupt
    goes on (stopping an attach lost a batch of lines this way, the log kept them)."""
    fed = state.apply(event)
    try:
        renderer.add(fed)
    except KeyboardInterrupt:
        renderer.add(fed, only_missing=True)
        raise


def display_unflushed(shell: Any, bundle: dict) -> None:
    """``display(bundle, raw=True)``, without ipykernel first flushing stdout and stderr when
    neither holds anything. Each flush is a round trip with the kernel's IOPub thread: the
    display of a quick run took 0.6 ms with them and 0.08 ms without (in a kernel), more when
    the kernel is busy. Pending output is flushed as usual, so it still comes first."""
    publisher = getattr(shell, "display_pub", None)
    pending = any(getattr(stream, "_flush_pending", True) is not False for stream in (sys.stdout, sys.stderr))
    if pending or publisher is None or "_flush_streams" in vars(publisher):
        display(bundle, raw=True)
        return
    publisher._flush_streams = _nothing  # shadows ipykernel's method for this one call
    try:
        display(bundle, raw=True)
    finally:
        del publisher._flush_streams


def _nothing() -> None:
    pass


def _run_state(args: Any, plan: Any, log: Path, observers: list, log_path: str | None = None) -> RunState:
    """The run model of a run about to start (its id is the log file's stem)."""
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


def register(ipython: Any, session: Any) -> None:
    """Register ``%%remote`` / ``%remote`` on ``ipython`` (called by load_ipython_extension);
    in a kernel, every run also shows the live rank grid (widgets/run.py)."""
    ipython.register_magics(RemoteMagics(ipython, session))
    from ..widgets import in_widget_kernel, install_run_grid

    if in_widget_kernel(ipython):
        install_run_grid(ipython)
