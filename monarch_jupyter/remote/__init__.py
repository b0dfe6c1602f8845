"""``%%remote``: stream a bash or Python cell on every rank of the job's host meshes.

- :mod:`.args` parses the magic's flags into a frozen :class:`~.args.RemoteArgs` and
  writes the flags part of ``%%remote?`` from the same argparse definitions.
- :mod:`.model` is the plain-data run model (:class:`~.model.RunState`).
- :mod:`.render` turns model updates into at most ~20 cell writes a second.
- :mod:`.actor` is the Monarch actor that runs on the workers.
- :mod:`.runner` drives a run on the session's owned event loop.
- :mod:`.magic` is the thin IPython layer.

Only :mod:`.actor` and :mod:`.runner` import Monarch; nothing here imports IPython
except :mod:`.magic`.
"""

from typing import Any

#: Objects with ``on_event(state, event)``, called on the kernel thread for every
#: event of every run (after :meth:`~.model.RunState.apply`), e.g. a live widget.
observers: list[Any] = []


def last_run() -> Any:
    """The :class:`~.model.RunState` of the latest ``%%remote`` run in this kernel, or None."""
    from .magic import _last

    return _last[0] if _last else None
