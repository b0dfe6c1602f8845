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
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True
