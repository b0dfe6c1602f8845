"""Reading files under ``.monarch/`` without blocking, following links or trusting strangers.

Every file the kernel side reads there (``state.pkl``, ``spec``, ``status.json``,
the lock) goes through :func:`read_bytes`. A FIFO, socket or device is refused
from ``lstat`` before it is opened; the open itself is ``O_NONBLOCK`` (a FIFO
swapped in between cannot block) and ``O_NOFOLLOW`` (the last component may not
be a symlink); ``fstat`` of the open descriptor must again be a regular file no
larger than the bound. For files that lead to code being run (the pickle, the
spec) :func:`check_trusted` first checks, like ssh's StrictModes, the file and
every folder from ``.monarch/`` down: ours, not writable by group or others.

Everything we create under ``.monarch/`` is private whatever the umask: folders through
:func:`private_dir` (0700), files through :func:`private_opener` or :func:`write_atomic` (0600),
because run logs and status may hold what a run printed (a token, a path).

Pure file operations: no Monarch import, no threads.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import stat
from pathlib import Path

from ..errors import MonarchJupyterError

MONARCH_DIR = ".monarch"
#: Bound for small text files (spec, status.json).
SMALL_BYTES = 1 << 20
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
#: Bound for a pickled job (a ProcessJob pickle is a few KB).
PICKLE_BYTES = 64 << 20

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
    stat.S_IFLNK: "a symlink",
}


class UnsafeFileError(MonarchJupyterError):
    """A file (or a folder above it) is not safe to read or to trust."""


def shown(path: str | os.PathLike[str]) -> str:
    """``path`` relative to the current folder when that is shorter."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return rel if len(rel) <= len(str(path)) else str(path)


def kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def read_bytes(path: str | os.PathLike[str], limit: int, what: str = "file", follow: bool = False) -> bytes:
    """The bytes of regular file ``path`` (at most ``limit``); never blocks.

    FileNotFoundError if it does not exist; UnsafeFileError, one line, if it is
    not a regular file, is a symlink (unless ``follow``) or is larger than ``limit``.
    """
    path = os.fspath(path)
    info = os.stat(path) if follow else os.lstat(path)
    _require_regular(path, info, limit, what)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafeFileError(f"refusing to read {what} {shown(path)}: it is a symlink") from None
        raise
    try:
        info = os.fstat(fd)
        _require_regular(path, info, limit, what)
        data = read_fd(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UnsafeFileError(f"refusing to read {what} {shown(path)}: larger than {limit} bytes")
    return data


def read_fd(fd: int, most: int) -> bytes:
    """Up to ``most`` bytes from ``fd``'s offset on (fewer at its end), in 1 MiB reads."""
    chunks, left = [], most
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_small(path: str | os.PathLike[str], limit: int = SMALL_BYTES) -> bytes | None:
    """:func:`read_bytes`, or None where there is nothing safe to read (missing, not a regular
    file, a symlink, larger than ``limit``, unreadable): for status files that may not exist yet."""
    try:
        return read_bytes(path, limit)
    except (OSError, MonarchJupyterError):
        return None


def read_text(path: str | os.PathLike[str], limit: int = SMALL_BYTES, what: str = "file") -> str:
    return read_bytes(path, limit, what).decode("utf-8", errors="replace")


def _require_regular(path: str, info: os.stat_result, limit: int, what: str) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeFileError(
            f"refusing to read {what} {shown(path)}: it is {kind(info.st_mode)}, not a regular file; "
            f"remove it (rm {shown(path)}) if it is not yours"
        )
    if info.st_size > limit:
        raise UnsafeFileError(
            f"refusing to read {what} {shown(path)}: {info.st_size} bytes, more than the {limit} expected"
        )


def trust_chain(path: str | os.PathLike[str]) -> list[Path]:
    """The file and every folder from the nearest ``.monarch/`` above it down to it.

    Without a ``.monarch/`` ancestor: the file and its folder.
    """
    path = Path(os.path.abspath(path))
    folders = []
    for parent in path.parents:
        folders.append(parent)
        if parent.name == MONARCH_DIR:
            break
    else:
        folders = [path.parent]
    return [path, *folders]


def check_trusted(path: str | os.PathLike[str], what: str = "file") -> None:
    """Raise UnsafeFileError unless ``path`` and the folders from ``.monarch/`` down
    are ours and not writable by group or others (ssh StrictModes style).

    ``path`` itself is not followed if it is a symlink: it must be a regular file.
    """
    uid = os.getuid()
    for target in trust_chain(path):
        info = os.lstat(target) if target == Path(os.path.abspath(path)) else os.stat(target)
        if target != Path(os.path.abspath(path)) and not stat.S_ISDIR(info.st_mode):
            raise UnsafeFileError(f"refusing to load {shown(path)}: {shown(target)} is not a folder")
        if info.st_uid != uid:
            raise UnsafeFileError(
                f"refusing to load {shown(path)}: {shown(target)} belongs to uid {info.st_uid}, "
                f"not you (uid {uid}); the {what} leads to code being run, so only your own files are loaded"
            )
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            mode = stat.S_IMODE(info.st_mode)
            raise UnsafeFileError(
                f"refusing to load {shown(path)}: {shown(target)} is writable by group/others "
                f"(mode {mode:o}); if you trust it, run: chmod go-w {shown(target)}"
            )


def write_atomic(path: str | os.PathLike[str], data: bytes, mode: int = PRIVATE_FILE) -> None:
    """Write ``data`` to ``path`` (0600 unless told) through a unique temporary file and a
    rename: a reader sees the old or the new content, never half of it."""
    path = os.fspath(path)
    fd, tmp = _create_tmp(path)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_TMP_COUNT = itertools.count()


def _create_tmp(path: str) -> tuple[int, str]:
    """A new 0600 file beside ``path`` that no other writer uses: ``tempfile.mkstemp`` without
    its random names (this process's id and a count; one left by a dead process is skipped)."""
    head = f"{os.path.dirname(path) or '.'}/.{os.path.basename(path)}.{os.getpid()}-"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = f"{head}{next(_TMP_COUNT)}.tmp"
        try:
            return os.open(tmp, flags, PRIVATE_FILE), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", head)


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Folder ``path``, made if missing; it and every folder from the nearest ``.monarch/``
    down to it are 0700 whatever the umask. An existing folder of ours is tightened to 0700
    unless group or others can write it: that one is left for :func:`check_trusted` to report."""
    path = Path(os.path.abspath(path))
    chain = _private_chain(path)
    chain[0].parent.mkdir(parents=True, exist_ok=True)
    for folder in chain:
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, PRIVATE_DIR)
        _tighten(folder, PRIVATE_DIR)
    return path


class NotYoursError(UnsafeFileError):
    """A folder that should be this user's private one is a link, not a folder, or another user's."""


def own_private_dir(folder: str | os.PathLike[str], refuse_shared: bool = False) -> Path:
    """``folder`` (and its missing parents) made, checked to be a real folder of this user, and
    tightened to 0700. Raises :class:`NotYoursError` for a link, a non-folder or another user's
    folder (someone may have made it first in a shared place such as ``/tmp``); with
    ``refuse_shared``, also for one of ours that group or others can write (it may hold their files)."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, PRIVATE_DIR)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise NotYoursError(f"{shown(folder)} is not a folder of yours")
    if refuse_shared and info.st_mode & 0o022:
        raise NotYoursError(f"{shown(folder)} can be written by others")
    if stat.S_IMODE(info.st_mode) != PRIVATE_DIR:
        os.chmod(folder, PRIVATE_DIR)
    return folder


def private_opener(path: str | os.PathLike[str], flags: int) -> int:
    """An ``opener`` for :func:`open`: a new file is 0600 whatever the umask, an existing one of
    ours is made 0600, a symlink in the last component is refused (ELOOP)."""
    fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), PRIVATE_FILE)
    try:
        info = os.fstat(fd)
        if (
            stat.S_ISREG(info.st_mode)
            and info.st_uid == os.getuid()
            and stat.S_IMODE(info.st_mode) != PRIVATE_FILE
        ):
            os.fchmod(fd, PRIVATE_FILE)
    except OSError:
        os.close(fd)
        raise
    return fd


def _private_chain(path: Path) -> list[Path]:
    """The folders from the nearest ``.monarch/`` down to ``path``, top first (just ``path``
    outside one)."""
    chain = [path]
    if path.name != MONARCH_DIR:
        for parent in path.parents:
            chain.append(parent)
            if parent.name == MONARCH_DIR:
                break
        else:
            chain = [path]
    return chain[::-1]


def _tighten(folder: Path, mode: int) -> None:
    info = os.lstat(folder)
    if (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and stat.S_IMODE(info.st_mode) != mode
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    ):
        os.chmod(folder, mode)
