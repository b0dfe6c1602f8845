"""The ``.monarch/`` folder layout shared with the ``monarch`` CLI.

``.monarch/<name>/state.pkl`` holds a context's pickled job, ``.monarch/<name>/spec``
its ``module.attr`` spec, and ``.monarch/job_state.pkl`` is a relative symlink
to the active context's ``state.pkl``. We add ``.monarch/<name>/status.json``,
a small JSON summary that the JupyterLab sidebar reads instead of unpickling.

Pure file operations: no Monarch import, no threads.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import MonarchJupyterError
from ..system import files as _files

MONARCH_DIR = ".monarch"
LINK_NAME = "job_state.pkl"
STATE_FILE = "state.pkl"
SPEC_FILE = "spec"
STATUS_FILE = "status.json"
DEFAULT_CONTEXT = "default"

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
#: Longest context name: a folder name, well under every file system's NAME_MAX.
MAX_NAME = 100


@dataclass(frozen=True)
class ContextInfo:
    """One context folder as the listing shows it."""

    name: str
    active: bool
    has_state: bool
    spec: str | None
    status: dict | None


def check_name(name: str) -> str:
    """Return ``name`` if it can be a context folder name, else raise."""
    if not _NAME.match(name or "") or name in (".", ".."):
        raise MonarchJupyterError(f"invalid context name {name!r}: use letters, digits, '_', '-' or '.'")
    if len(name) > MAX_NAME:
        raise MonarchJupyterError(
            f"invalid context name {name[:30] + '…'!r}: {len(name)} characters; use at most {MAX_NAME}"
        )
    return name


class Layout:
    """Paths and operations of one folder's ``.monarch/`` directory."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.dir = self.root / MONARCH_DIR
        self.link = self.dir / LINK_NAME

    def context_dir(self, name: str) -> Path:
        return self.dir / check_name(name)

    def state_path(self, name: str) -> Path:
        return self.context_dir(name) / STATE_FILE

    def current(self) -> str:
        """The active context: the symlink's target folder, else ``default``.

        The link must read ``<name>/state.pkl`` (as ``monarch context use`` writes
        it); anything else is named with its fix instead of being guessed at.
        """
        if self.link.is_symlink():
            target = os.readlink(self.link)
            parts = Path(target).parts
            if (
                not os.path.isabs(target)
                and len(parts) == 2
                and parts[1] == STATE_FILE
                and _NAME.match(parts[0])
                and parts[0] not in (".", "..")
            ):
                return parts[0]
            raise MonarchJupyterError(
                f"{_files.shown(self.link)} points to {target!r}, not to a context's "
                f"<name>/{STATE_FILE} inside {MONARCH_DIR}/; fix it with "
                f"%job context use {DEFAULT_CONTEXT} (or another context name)"
            )
        return DEFAULT_CONTEXT

    def legacy_state(self) -> Path | None:
        """A plain-file ``job_state.pkl`` from older Monarch, if there is one."""
        if self.link.exists() and not self.link.is_symlink():
            return self.link
        return None

    def ensure(self) -> None:
        """Create ``.monarch/`` and the symlink as the CLI does (migrating a plain file)."""
        _files.private_dir(self.dir)
        if not self.link.is_symlink():
            default_dir = _files.private_dir(self.dir / DEFAULT_CONTEXT)
            if self.link.exists():
                self.link.rename(default_dir / STATE_FILE)
            self.link.symlink_to(Path(DEFAULT_CONTEXT) / STATE_FILE)

    def exists(self, name: str) -> bool:
        return self.context_dir(name).is_dir()

    def names(self) -> list[str]:
        if not self.dir.is_dir():
            return []
        return sorted(p.name for p in self.dir.iterdir() if p.is_dir() and _NAME.match(p.name))

    def create(self, name: str) -> bool:
        """Create context ``name``; False if it already existed."""
        path = self.context_dir(name)
        existed = path.is_dir()
        _files.private_dir(path)
        return not existed

    def use(self, name: str) -> None:
        """Point the symlink at ``name`` (created if missing), as ``monarch context use``."""
        self.ensure()
        _files.private_dir(self.context_dir(name))
        tmp = self.dir / f".{LINK_NAME}.{os.getpid()}.tmp"
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(Path(name) / STATE_FILE)
        os.replace(tmp, self.link)

    def remove(self, name: str) -> None:
        """Delete context ``name``; the symlink falls back to ``default`` if it pointed there."""
        shutil.rmtree(self.context_dir(name), ignore_errors=True)
        if self.link.is_symlink() and self.current() == name:
            self.use(DEFAULT_CONTEXT)

    def read_spec(self, name: str, trusted: bool = False) -> str | None:
        """The saved spec text, or None. ``trusted=True`` (before the spec leads
        to importing code) also requires it, and its folders from ``.monarch/``
        down, to be ours and not writable by others."""
        path = self.context_dir(name) / SPEC_FILE
        try:
            text = _files.read_text(path, what="spec").strip()
        except FileNotFoundError:
            return None
        except _files.UnsafeFileError:
            if trusted:
                raise
            return None
        if trusted:
            _files.check_trusted(path, what="spec")
        return text or None

    def write_spec(self, name: str, spec: str | None) -> None:
        """Save ``spec`` (a ``module.attr`` path) or remove it when None."""
        path = self.context_dir(name) / SPEC_FILE
        if spec is None:
            path.unlink(missing_ok=True)
            return
        _files.private_dir(path.parent)
        _files.write_atomic(path, spec.encode())

    def read_status(self, name: str) -> dict | None:
        try:
            status = json.loads(_files.read_text(self.context_dir(name) / STATUS_FILE, what="status"))
        except (OSError, ValueError, _files.UnsafeFileError):  # missing, a FIFO, a symlink, huge, not JSON
            return None
        return status if isinstance(status, dict) else None

    def write_status(self, name: str, status: dict) -> None:
        """Write ``status.json`` atomically (the sidebar polls it)."""
        path = self.context_dir(name) / STATUS_FILE
        _files.private_dir(path.parent)
        _files.write_atomic(path, json.dumps(status, indent=1, sort_keys=True).encode())

    def infos(self) -> list[ContextInfo]:
        current = self.current()
        return [
            ContextInfo(
                name=n,
                active=n == current,
                has_state=(self.dir / n / STATE_FILE).exists(),
                spec=self.read_spec(n),
                status=self.read_status(n),
            )
            for n in self.names()
        ]
