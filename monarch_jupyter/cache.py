"""Reading and writing the pickle cache safely.

The cache is code: unpickling runs whatever the file says. Like ssh with its
keys, we refuse a file (or its folder) that another user owns or that group or
others can write, and we write our own files 0600. A corrupt or truncated file
is reported and left where it is, so nothing about a running job is lost.
"""

from __future__ import annotations

import os
import pickle
import stat
import tempfile
from pathlib import Path
from typing import Any

from .errors import CacheError


def _shown(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def check_safe(path: Path) -> None:
    """Raise CacheError unless ``path`` and its folder are ours and not writable by others."""
    real = Path(os.path.realpath(path))
    for target in (real, real.parent):
        info = target.stat()
        if info.st_uid != os.getuid():
            raise CacheError(
                f"refusing to load {_shown(path)}: {_shown(target)} belongs to uid {info.st_uid}, "
                f"not you (uid {os.getuid()}); the job cache is code, so only your own files are loaded"
            )
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            mode = stat.S_IMODE(info.st_mode)
            raise CacheError(
                f"refusing to load {_shown(path)}: {_shown(target)} is writable by group/others "
                f"(mode {mode:o}); if you trust it, run: chmod go-w {_shown(target)}"
            )


def load_job(path: Path) -> Any:
    """Unpickle the job at ``path`` after the safety check; never modifies the file."""
    check_safe(path)
    data = Path(path).read_bytes()
    if not data:
        raise CacheError(
            f"{_shown(path)} is empty; it was left as it is. "
            "`%job kill` clears it, `%job apply SPEC` starts a new job"
        )
    try:
        job = pickle.loads(data)  # noqa: S301 - checked above: our own, private file
    except Exception as error:  # pickle can raise almost anything on bad input
        raise CacheError(
            f"{_shown(path)} is corrupt or truncated ({type(error).__name__}: {error}); "
            "it was left as it is. `%job kill` removes it, `%job apply SPEC` replaces it"
        ) from None
    from monarch.job import JobTrait

    if not isinstance(job, JobTrait):
        raise CacheError(
            f"{_shown(path)} holds a {type(job).__name__}, not a Monarch job; it was left as it is"
        )
    return job


def dump_job(job: Any, path: Path) -> None:
    """Pickle ``job`` to ``path`` (following the context symlink), 0600, atomically."""
    path = Path(path)
    real = Path(os.path.realpath(path)) if path.is_symlink() else path
    real.parent.mkdir(parents=True, exist_ok=True)
    data = pickle.dumps(job)
    fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=".state.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, real)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove(path: Path) -> None:
    """Delete the state file a context points to (not the symlink itself)."""
    path = Path(path)
    real = Path(os.path.realpath(path)) if path.is_symlink() else path
    real.unlink(missing_ok=True)
