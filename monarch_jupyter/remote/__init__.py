"""``%%remote``: stream a bash or Python cell on every rank of the job's host meshes.

Kernel side, top to bottom (a module imports only those below it):

- :mod:`.magic`: the thin IPython layer (``%%remote``, ``%remote VERB``).
- :mod:`.verbs`: the ``%remote`` verbs (``runs``, ``attach``, ``stop``), a registry.
- :mod:`.runner`: plans runs, keeps the actors warm, starts and follows runs, asks every rank;
  :mod:`.drive`: one run on the session's event loop.
- :mod:`.index`: the runs index (one JSON entry per run).
- :mod:`.args` (flags), :mod:`.model` (the plain-data run model), :mod:`.render` (text),
  :mod:`.spool` (the run log), :mod:`.follow` (a detached run's grid), :mod:`.protocol` (the
  wire), :mod:`.errors`.

Worker side: :mod:`.host` (the Monarch actor and runs on a host; it travels to the workers by
value and imports nothing of the kernel side). Monarch is imported by :mod:`.host.actor` and, on the first run, :mod:`.drive` and :mod:`.runner`;
nothing here imports IPython except :mod:`.magic` (and :func:`last_run`, when called).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import RemoteError

if TYPE_CHECKING:
    from .model import Observer, RunState

#: Objects with ``on_event(state, event)``, called on the kernel thread for every
#: event of every run (after :meth:`~.model.RunState.apply`), e.g. a live widget.
observers: list[Observer] = []

#: The ``%%remote`` magics registered in this process (set by :func:`.magic.register`), or None.
registered: Any = None


def last_run() -> RunState | None:
    """The :class:`~.model.RunState` of the latest ``%%remote`` run in this kernel, or None."""
    return getattr(registered, "last", None)


__all__ = ["RemoteError", "last_run", "observers"]
