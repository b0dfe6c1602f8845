"""Live views for notebooks: the ``%job`` widget and the per-rank run grid.

Both are views over plain data (``JobStatus``; a run's ``RunState``, observed):
the data-to-view logic is pure and tested without a browser, the widget
classes only wire it to the widget protocol (:mod:`.comm_model`). Nothing here is imported by
``import monarch_jupyter``: the magics import it when they display a widget.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # at run time imported only when a grid is shown (start-up cost)
    # the run model's types as run.py sees them: this package's one edge to remote/ stays run.py's
    from .run import Event, RunState, RunWidget


def in_widget_kernel(shell: object) -> bool:
    """True inside an IPython kernel (ipykernel), where widgets can have a front end.

    Terminal IPython has no kernel and no comms: it gets plain text instead.
    """
    if getattr(shell, "kernel", None) is None:
        return False
    # Found, not imported: %load_ext does not pay ipywidgets' import (benchmarks/README.md, load).
    import importlib.util

    return importlib.util.find_spec("ipywidgets") is not None


#: A run shorter than this shows no grid at all: the widget would cost a short run most of its
#: time and an output message (benchmarks/README.md, the grid), and a grid that flashes once
#: tells nothing (the run's result follows as its own output).
SHOW_AFTER = 0.3


class RemoteRunObserver:
    """``%%remote`` observer: shows a live ``run.RunWidget`` for each run that lasts.

    A run that ends within ``show_after`` seconds displays nothing here and never
    imports the grid's modules. Once a run has lasted that long, the widget is built from
    everything the run model holds by then and displayed, with a display id, where the cell's
    output stands; then it observes the run.

    The grid's output is one bundle: the widget's view, and the run's payload with ``state:
    running`` and its id (``RunState.running_bundle``) with its HTML. A notebook saved mid-run
    and reopened without the widget's kernel renders "still running when saved — %remote attach
    <id>" from it (the labextension draws it where the widget cannot be; front ends without a
    widget manager pick the HTML). When the run ends the magic puts the result in the grid's
    place (:meth:`result_place`), so a finished cell holds no widget.
    """

    def __init__(
        self,
        show_after: float = SHOW_AFTER,
        show_bundle: Callable[[dict[str, object], str, bool], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
        **widget_options: Any,
    ) -> None:
        self._show_bundle = _display_bundle if show_bundle is None else show_bundle
        self._show_after = show_after
        self._clock = clock
        self._options = widget_options
        self._state: RunState | None = None
        self._began = 0.0
        self.widget: RunWidget | None = None
        self.display_id: str | None = None  # of the grid's output, for the run last shown
        self._shown_for: object = None  # the run whose grid stands at display_id

    def on_event(self, state: RunState, event: Event) -> None:
        if state is not self._state:
            self._state, self._began, self.widget = state, self._clock(), None
        if self.widget is None and not state.finished:
            self.on_tick(state)  # shows the widget once the run lasted; then the widget throttles
        if self.widget is not None:
            self.widget.on_event(state, event)
        if state.finished:  # its last event: nothing here keeps the run alive
            self._state = None

    def on_tick(self, state: RunState) -> None:
        """Show the live widget once the run has lasted; then pass the tick on."""
        if state is not self._state:
            return
        if self.widget is not None:
            self.widget.on_tick(state)
            return
        if self._clock() - self._began < self._show_after:
            return
        from .run import RunWidget

        self.widget = RunWidget(state, title=f"%%remote {state.target}", clock=self._clock, **self._options)
        self.display_id = f"monarch-run-{state.run_id or self.widget.model_id}"
        self._shown_for = state
        self._show_bundle(self.widget.grid_bundle(state), self.display_id, False)

    def result_place(self, state: RunState) -> tuple[str, bool] | None:
        """Where ``state``'s result goes: the display id of its grid and whether a view of the
        grid rendered (then the lines were in the grid, not the stream); None: no grid shown."""
        if state is not self._shown_for or self.display_id is None or self.widget is None:
            return None
        return self.display_id, self.widget.view_shown

    def on_result(self, state: RunState) -> None:
        """``state``'s result took its grid's place: the grid's model is closed, so no view, saved
        widget state or comm outlives it (a detached run's grid is another widget)."""
        if state is self._shown_for and self.widget is not None:
            self.widget.close()
            self.widget, self._shown_for = None, None


def _display_bundle(bundle: dict[str, object], display_id: str, update: bool) -> None:
    from IPython.display import display

    display(bundle, raw=True, display_id=display_id, update=update)


def install_run_grid(magics: Any) -> None:  # remote.magic.RemoteMagics
    """Show the live grid for every ``%%remote`` run of ``magics`` (idempotent; cheap), and for a
    detached run the grid that follows it between cells."""
    observers = getattr(magics, "observers", None)
    if observers is not None and not any(isinstance(o, RemoteRunObserver) for o in observers):
        # the grid's Stacks button and resources ask the hosts through the magic (its runner)
        requests = {
            k: getattr(magics, f"grid_{k}") for k in ("stacks", "usage") if hasattr(magics, f"grid_{k}")
        }
        observers.append(RemoteRunObserver(**requests))
    magics.detached_view = _detached_grid


def _detached_grid(state: RunState, **options: Any) -> RunWidget:
    from .run import RunWidget

    return RunWidget(state, **options)


#: Seconds after the loading cell ends before the widget modules are imported in the background.
PRELOAD_DELAY = 1.0


def preload(ipython: Any, delay: float = PRELOAD_DELAY, also: tuple[str, ...] = ()) -> None:
    """Import the widget modules, then the modules named in
    ``also``, on a daemon thread ``delay`` s after the current cell ends, so the first ``%job``,
    grid or run does not pay for them; a command that comes sooner imports them itself."""
    events = getattr(ipython, "events", None)
    if events is None:
        return

    def after_cell(*_args: Any) -> None:
        events.unregister("post_run_cell", after_cell)
        timer = threading.Timer(delay, _import_views, args=(also,))
        timer.daemon = True
        timer.name = "monarch-jupyter-preload"
        timer.start()

    events.register("post_run_cell", after_cell)


def _import_views(also: tuple[str, ...] = ()) -> None:
    for name in (f"{__name__}.job", *also):
        with contextlib.suppress(Exception):  # an import error shows where the module is used, in its cell
            importlib.import_module(name)
