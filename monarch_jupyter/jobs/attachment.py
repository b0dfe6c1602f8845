"""Which job this kernel is connected to, and whether that still holds.

An attachment is valid for one folder, one context and one version of the
cache file: after ``%cd``, a context switch, or a cache change made by someone
else (``monarch kill``, another kernel's apply) it is forgotten, and the next
call attaches again from the cache. Pure bookkeeping: no Monarch, no files.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any


class Attachment:
    """The connected job, its JobState and the label of the spec that made it."""

    def __init__(self) -> None:
        self.job: Any = None
        self.state: Any = None
        self.label: str | None = None
        self._where: Hashable = None
        self._stamp: Hashable = None
        # The cache file vanished (``.monarch/`` removed or renamed) while the job still runs:
        # the connection is kept, so the job can still be seen and killed.
        self.cache_gone = False

    @property
    def connected(self) -> bool:
        return self.job is not None

    def remember(self, job: Any, state: Any, where: Hashable, stamp: Hashable) -> None:
        """Record a connection to ``job`` made at ``where`` with the cache at ``stamp``."""
        self.job, self.state = job, state
        self._where, self._stamp = where, stamp

    def forget_unless(
        self, where: Hashable, stamp: Hashable, alive: Callable[[], bool] = lambda: False
    ) -> None:
        """Forget the connection unless it was made at ``where`` with the cache at ``stamp``;
        with no cache at all (``stamp`` None) at the same place, it is kept while ``alive()``."""
        if self.job is None:
            return
        if (where, stamp) == (self._where, self._stamp):
            self.cache_gone = False
        elif stamp is None and where == self._where and alive():
            self.cache_gone = True
        else:
            self.clear()

    def clear(self) -> None:
        self.job = self.state = self.label = None
        self._where = self._stamp = None
        self.cache_gone = False
