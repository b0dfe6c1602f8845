"""Monarch's own log file, ``/tmp/<user>/monarch_log[_<suffix>].log``, made safe before Monarch opens it.

Monarch 0.7's telemetry (Rust, ``hyperactor_telemetry``) appends to that file in
every process that imports it, following symlinks; the folder is fixed (``/tmp``
and the login name: ``TMPDIR``, ``USER``, ``MONARCH_FILE_LOG`` change nothing),
only the name's suffix can be set (``MONARCH_LOG_SUFFIX``). Another user can
create ``/tmp/<user>/`` first and plant a link there to a file of ours. So before
Monarch loads in the kernel (and so in the workers it starts, which inherit the
environment) :func:`secure` makes ``/tmp/<user>/`` ours and 0700 and removes a
link or other odd thing at the log's name; when the folder is someone else's,
which we cannot fix, the log gets an unguessable suffix and one line says so.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import stat
from pathlib import Path

SUFFIX_VAR = "MONARCH_LOG_SUFFIX"


def log_dir() -> Path:
    return Path("/tmp") / pwd.getpwuid(os.getuid()).pw_name


def log_path(suffix: str | None = None) -> Path:
    suffix = os.environ.get(SUFFIX_VAR, "") if suffix is None else suffix
    return log_dir() / (f"monarch_log_{suffix}.log" if suffix else "monarch_log.log")


def secure() -> str | None:
    """Make Monarch's log safe to open; returns a line to show when it could not be made private."""
    try:
        folder = log_dir()
    except KeyError:
        return None  # no name for our uid: Monarch's own lookup fails alike
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    try:
        info = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        # Someone else's folder (or a link): a name they cannot guess, in this process and its workers.
        os.environ[SUFFIX_VAR] = f"{os.environ.get(SUFFIX_VAR, '')}{secrets.token_hex(8)}"
        return (
            f"monarch_jupyter: {folder} (where Monarch writes its own log) is not a folder of yours; "
            f"its log goes to an unguessable name there this time: have {folder} removed"
        )
    if stat.S_IMODE(info.st_mode) != 0o700:
        with contextlib.suppress(OSError):
            os.chmod(folder, 0o700)
    path = log_path()
    try:
        found = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(found.st_mode) or found.st_uid != os.getuid():
        with contextlib.suppress(OSError):
            os.unlink(path)  # a link (or a stranger's file) planted in our folder: never followed
    return None
