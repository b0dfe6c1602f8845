"""The user's own actors in the notebook.

Procs spawned from the kernel once the extension has handed out the job's host
meshes (``monarch_jupyter.state()``) send their stdout and stderr (prints,
``logging``, native writes) live to the cell that was running when it was
produced, labelled like ``%%remote`` (``[hosts=1]``, ``[hosts=1:err]``); and a call
failing on several ranks shows one error naming every failing rank, identical
tracebacks grouped, notebook frames as ``cell [N] line L``.

``failure(err)`` gives every failing rank of the call that raised the ``ActorError``
``err``; ``live_output(False)`` stops output forwarding for procs spawned after it;
``log_path()`` is the file with every line (a cell shows at most 1000 a rank).
"""

from __future__ import annotations

from .kernel import enable, failure, live_output, log_path

__all__ = ["enable", "failure", "live_output", "log_path"]
