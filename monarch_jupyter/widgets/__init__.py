"""Live views for notebooks: the ``%job`` widget and the per-rank run grid.

Both are views over plain data (``JobStatus``; a run's ``RunState``, observed):
the data-to-view logic is pure and tested without a browser, the widget
classes only wire it to ipywidgets / anywidget. Nothing here is imported by
``import monarch_jupyter``: the magics import it when they display a widget.
"""

from __future__ import annotations


def in_widget_kernel(shell: object) -> bool:
    """True inside an IPython kernel (ipykernel), where widgets can have a front end.

    Terminal IPython has no kernel and no comms: it gets plain text instead.
    """
    if getattr(shell, "kernel", None) is None:
        return False
    # Found, not imported: importing ipywidgets costs ~40 ms that %load_ext need not pay.
    import importlib.util

    return importlib.util.find_spec("ipywidgets") is not None


class LazyRunGrid:
    """The ``%%remote`` observer that shows the run grid (``run.RemoteRunObserver``),
    imported on the first run's first event: anywidget and ipywidgets (~50 ms)
    stay off the path of ``%load_ext``."""

    def __init__(self) -> None:
        self.observer = None

    def _real(self):
        if self.observer is None:
            from .run import RemoteRunObserver

            self.observer = RemoteRunObserver()
        return self.observer

    def on_event(self, state, event) -> None:
        self._real().on_event(state, event)

    def on_tick(self, state) -> None:
        self._real().on_tick(state)


def install_run_grid(ipython) -> None:
    """Show the live grid for every ``%%remote`` run in this kernel (idempotent; cheap)."""
    magics = ipython.magics_manager.registry.get("RemoteMagics")
    observers = getattr(magics, "observers", None)
    if observers is not None and not any(isinstance(o, LazyRunGrid) for o in observers):
        observers.append(LazyRunGrid())
