"""Which job caches this user's own kernels wrote: an HMAC beside each one.

Unpickling runs whatever the file says, and a ``.monarch/`` extracted from a git
clone, a tarball or a shared folder belongs to whoever extracted it, so owner
and mode checks cannot tell it from our own. Like Jupyter's notebook signatures,
every cache our code writes gets ``<file>.sig``: hmac-sha256 of its bytes under a
key only this user can read (``$XDG_CONFIG_HOME/monarch_jupyter/cache.key``,
0600 in a 0700 folder, made on first use). A cache without a matching signature
is never unpickled; ``%job trust`` signs it deliberately (e.g. after
``monarch apply`` in a terminal, which writes no signature).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from ..errors import CacheError
from ..system import files as _files

SUFFIX = ".sig"
KEY_NAME = "cache.key"
_DOMAIN = b"monarch_jupyter job cache v1\0"
_KEY_BYTES = 32


def config_dir() -> Path:
    """This user's private config folder of monarch_jupyter (XDG, else ``~/.config``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "monarch_jupyter"


def sig_path(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    return path.with_name(path.name + SUFFIX)


def _private_folder(folder: Path) -> None:
    try:
        _files.own_private_dir(folder)
    except _files.NotYoursError as error:
        raise CacheError(f"{error}: remove it to sign job caches") from None


def _key() -> bytes:
    """The signing key, made on first use (atomically: two kernels starting at once agree)."""
    try:
        return _read_or_make_key()
    except OSError as error:
        raise CacheError(
            f"cannot read or make the cache signing key in {_files.shown(config_dir())} "
            f"({error.strerror or error}): set XDG_CONFIG_HOME to a private folder you can write"
        ) from None


def _read_or_make_key() -> bytes:
    folder = config_dir()
    _private_folder(folder)
    path = folder / KEY_NAME
    try:
        data = _files.read_bytes(path, 4096, what="signing key")
    except FileNotFoundError:
        tmp = folder / f".{KEY_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, secrets.token_hex(_KEY_BYTES).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # fails if another kernel made it first: theirs is used
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
        data = _files.read_bytes(path, 4096, what="signing key")
    except _files.UnsafeFileError as error:
        raise CacheError(str(error)) from None
    info = os.lstat(path)
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        raise CacheError(
            f"the signing key {_files.shown(path)} is readable or owned by someone else: "
            f"remove it (a new one is made; then %job trust re-signs your caches)"
        )
    if len(data) < _KEY_BYTES:
        raise CacheError(f"the signing key {_files.shown(path)} is truncated: remove it")
    return data


def digest(data: bytes) -> str:
    return hmac.new(_key(), _DOMAIN + data, hashlib.sha256).hexdigest()


def sign(path: str | os.PathLike[str], data: bytes) -> None:
    """Write the signature of ``data`` (the bytes of cache ``path``) beside it, 0600."""
    _files.write_atomic(sig_path(path), digest(data).encode() + b"\n")


def check(path: str | os.PathLike[str], data: bytes) -> str | None:
    """None when ``data`` (read from ``path``) carries our signature, else why not."""
    try:
        raw = _files.read_bytes(sig_path(path), 256, what="cache signature")
    except FileNotFoundError:
        return "it has no signature"
    except (OSError, _files.UnsafeFileError):
        return "its signature file is not a small regular file"
    if not hmac.compare_digest(raw.strip(), digest(data).encode()):
        return "it does not match its signature (changed since this user's kernels wrote it)"
    return None


def remove(path: str | os.PathLike[str]) -> None:
    sig_path(path).unlink(missing_ok=True)
