"""The user's own actors in the notebook.

``failure(err)`` gives every failing rank of the call that raised the ``ActorError``
``err``; in a cell, such an error shows all of them, grouped (see :mod:`.failures`).
Collection starts when the extension hands out the job's host meshes
(``monarch_jupyter.state()``) and covers the procs spawned from then on.
"""

from __future__ import annotations

from .kernel import enable, failure

__all__ = ["enable", "failure"]
