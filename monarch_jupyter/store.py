"""The pickle cache of each context in one folder, as the session reads and writes it.

Paths follow the ``monarch`` CLI (see :mod:`.contexts`); the bytes go through
:mod:`.cache` (ownership checks, 0600, atomic replace). The stamp of a state
file (inode, mtime) tells the session when someone else changed it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import _quiet, cache
from .contexts import Layout


class JobStore:
    """Cached jobs and saved specs of the contexts under ``layout``."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def state_path(self, context: str | None = None) -> Path:
        """The state file of ``context`` (default: the active one)."""
        name = context or self.layout.current()
        legacy = self.layout.legacy_state()
        if legacy is not None and context in (None, "default"):
            return legacy
        return self.layout.state_path(name)

    def stamp(self, context: str | None = None) -> tuple[int, int] | None:
        """(inode, mtime) of the state file, or None when there is none."""
        try:
            info = self.state_path(context).stat()
        except OSError:
            return None
        return (info.st_ino, info.st_mtime_ns)

    def load(self, context: str | None = None) -> Any | None:
        """The cached job of ``context``, or None; CacheError if unsafe or corrupt."""
        path = self.state_path(context)
        if not path.exists():
            return None
        _quiet.install()  # unpickling imports monarch.job, whose logger we tame first
        return cache.load_job(path)

    def save(self, context: str, job: Any, spec_path: str | None) -> None:
        """Pickle ``job`` as the context's state and record its spec."""
        self.layout.ensure()
        self.layout.create(context)
        cache.dump_job(job, self.state_path(context))
        self.save_spec(context, spec_path)

    def save_spec(self, context: str, spec_path: str | None) -> None:
        self.layout.ensure()
        self.layout.write_spec(context, spec_path)

    def saved_spec(self, context: str) -> str | None:
        return self.layout.read_spec(context) if self.layout.exists(context) else None

    def remove(self, context: str) -> None:
        cache.remove(self.state_path(context))
