"""The pickle cache of each context in one folder, as the session reads and writes it.

Paths follow the ``monarch`` CLI (see :mod:`.contexts`); the bytes go through
:mod:`.cache` (ownership checks, 0600, atomic replace). The stamp of a state
file (inode, mtime) tells the session when someone else changed it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..runtime import chatter as _quiet
from . import cache
from .contexts import DEFAULT_CONTEXT, LINK_NAME, MONARCH_DIR, STATE_FILE, Layout


def fingerprint(root: str) -> tuple:
    """What changes when the active context of ``root`` or its cache changes, in two
    system calls: the link ``.monarch/job_state.pkl`` itself (lstat: a context switch
    replaces it) and the state file it leads to (stat through it; without a link the
    default context's). Cheap enough for every ``%%remote`` run; a caller re-reads
    the context and the stamp when it differs from the last one."""
    link = os.path.join(root, MONARCH_DIR, LINK_NAME)
    try:
        info = os.lstat(link)
        own = (info.st_ino, info.st_mode, info.st_mtime_ns, info.st_ctime_ns)
    except OSError:
        own = None
        link = os.path.join(root, MONARCH_DIR, DEFAULT_CONTEXT, STATE_FILE)
    try:
        info = os.stat(link)
        target = (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)
    except OSError:
        target = None
    return (root, own, target)


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
