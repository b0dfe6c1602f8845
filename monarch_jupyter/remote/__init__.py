"""``%%remote``: stream a bash or Python cell on every rank of the job's host meshes.

Four rooms, by role, each importing only the rooms after it (``lint-imports`` contract
``remote-rooms``):

- :mod:`.cell`: the IPython glue (``%%remote``, ``%remote VERB``, ``%autoremote``).
- :mod:`.run`: orchestration on the kernel's one event loop (plan, drive, follow, sessions, the
  runs index and log).
- :mod:`.view`: pure plain data and text (flags, the run model, rendering, folding).
- :mod:`.wire`: what both sides read (the protocol, py-spy's JSON).

Worker side: :mod:`.host` (the Monarch actor and runs on a host; it travels to the workers by
value and imports nothing of the kernel side but :mod:`.wire`). Here at the top: :mod:`.errors`
(what every room raises), :mod:`.rank_shell` (``%remote shell``'s terminal program) and
:func:`last_run` (a persisted import path). Nothing here imports IPython except :mod:`.cell`
(and :func:`last_run`, when called).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import RemoteError

if TYPE_CHECKING:
    from .view.model import Observer, RunState

#: Objects with ``on_event(state, event)``, called on the kernel thread for every
#: event of every run (after :meth:`~.model.RunState.apply`), e.g. a live widget.
observers: list[Observer] = []

#: The ``%%remote`` magics registered in this process (set by :func:`.magic.register`), or None.
registered: Any = None


def last_run() -> RunState | None:
    """The :class:`~.model.RunState` of the latest ``%%remote`` run in this kernel, or None."""
    return getattr(registered, "last", None)


__all__ = ["RemoteError", "last_run", "observers"]
