"""Reading and writing the pickle cache safely, one writer at a time.

The cache is code: unpickling runs whatever the file says. Like ssh with its
keys, we refuse a file, or any folder from ``.monarch/`` down to it, that
another user owns or that group or others can write, and we write our own files
0600. A FIFO, device or huge file is refused without blocking (see ``_files``).
A corrupt or truncated file is reported and left where it is; ``%job kill`` and
``%job apply`` move it aside (:func:`quarantine`), never delete it.

Writers (apply, kill, context switches; this kernel, another kernel, or the
``monarch`` CLI through us) serialise on an ``fcntl`` lock, ``.monarch/.lock``
(:func:`locked`), so two notebooks acting at once end with one job.
"""

from __future__ import annotations

import fcntl
import functools
import os
import pickle
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ..errors import CacheError, Interrupted
from ..system import files as _files
from ..system import procfs as _procfs
from ..system.files import shown as _shown
from ..text import timefmt as _timefmt
from . import signing as _signing

LOCK_FILE = ".lock"
F = TypeVar("F", bound=Callable[..., Any])


class UnusableCacheError(CacheError):
    """A cache file this kernel will not use, which ``%job apply SPEC`` and ``%job kill`` move
    aside (never delete): its folders are yours, the file itself cannot be trusted or read."""


class UnreadableCacheError(UnusableCacheError):
    """The cache file is empty, corrupt, truncated or not a job."""


class UntrustedCacheError(UnusableCacheError):
    """The cache file carries no signature of this user's kernels: it was not unpickled."""


class ForeignCacheError(UnusableCacheError):
    """The cache file belongs to another user (in folders of yours): it was not read."""


#: What every unusable cache's line ends with: how the notebook gets a job again.
RECOVER = "`%job apply SPEC` moves it aside and starts a new job; `%job kill` moves it aside"


def check_safe(path: Path) -> None:
    """Raise CacheError unless ``path`` and the folders from ``.monarch/`` down are
    ours and not writable by group/others."""
    try:
        _files.check_trusted(path, what="job cache")
    except _files.UnsafeFileError as error:
        raise CacheError(str(error)) from None


def load_job(path: Path) -> Any:
    """Unpickle the job at ``path`` after the safety checks; never modifies the file."""
    path = _real(path)
    _refuse_foreign(path)
    data = _read_checked(path)
    if not data:
        raise UnreadableCacheError(f"{_shown(path)} is empty; it was left as it is. {RECOVER}")
    why = _signing.check(path, data)
    if why is not None:  # a writer of ours between the two files: read both once more
        data = _files.read_bytes(path, _files.PICKLE_BYTES, what="job cache")
        why = _signing.check(path, data)
    if why is not None:
        raise UntrustedCacheError(
            f"{_shown(path)} was not written by your kernels ({why}; {describe(path)}): "
            "it was not loaded. If it is yours (e.g. `monarch apply` in a terminal), "
            f"`%job trust` accepts it; otherwise {RECOVER}"
        )
    job, unusable = _unpickle(data)  # checked above: our own, private file
    if unusable is not None:
        raise UnreadableCacheError(f"{_shown(path)} {unusable}; it was left as it is. {RECOVER}")
    return job


def _real(path: Path) -> Path:
    """``path``, or the file it links to (e.g. ``.monarch/job_state.pkl``): what is checked and read."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _read_checked(path: Path) -> bytes:
    """The bytes of the cache at ``path`` (bounded, non-blocking), after the ownership and mode
    checks of the file and its folders; CacheError (one line) when either fails."""
    try:
        data = _files.read_bytes(path, _files.PICKLE_BYTES, what="job cache")
        check_safe(path)
    except _files.UnsafeFileError as error:
        raise CacheError(str(error)) from None
    return data


def _unpickle(data: bytes) -> tuple[Any, str | None]:
    """``(job, None)`` when ``data`` unpickles into a Monarch job, else ``(None, what it is)``
    ("is empty", "is corrupt or truncated (…)", "holds a …, not a Monarch job")."""
    if not data:
        return None, "is empty"
    try:
        job = pickle.loads(data)
    except Exception as error:  # pickle can raise almost anything on bad input
        return None, f"is corrupt or truncated ({type(error).__name__}: {error})"
    from monarch.job import JobTrait

    if not isinstance(job, JobTrait):
        return None, f"holds a {type(job).__name__}, not a Monarch job"
    return job, None


def _refuse_foreign(path: Path) -> None:
    """ForeignCacheError when ``path`` is a regular file of another user in folders that are yours
    and private (a folder that is not is refused as unsafe by :func:`check_safe`)."""
    try:
        info = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISREG(info.st_mode) or info.st_uid == os.getuid():
        return
    try:
        _files.check_trusted(path.parent, what="job cache's folder")
    except _files.UnsafeFileError:
        return  # the folders themselves are the problem: check_safe says so
    raise ForeignCacheError(
        f"{_shown(path)} belongs to another user ({describe(path)}): it was not read. {RECOVER}"
    )


def describe(path: Path) -> str:
    """Who owns the file at ``path`` and when it was written, for a person deciding to trust it."""
    info = os.stat(path)
    try:
        import pwd

        owner = pwd.getpwuid(info.st_uid).pw_name
    except (KeyError, ImportError):
        owner = f"uid {info.st_uid}"
    return f"owner {owner}, written {_timefmt.local_time(info.st_mtime)}, {info.st_size} bytes"


def trust(path: Path) -> str:
    """Sign the cache at ``path`` as this user's own after the ownership checks, once it has
    proved to unpickle into a Monarch job (the user's deliberate step: it runs the pickle's code);
    returns :func:`describe` of what was signed. A cache that does not unpickle is left unsigned,
    as it was: UnreadableCacheError."""
    path = _real(path)
    data = _read_checked(path)
    _, unusable = _unpickle(data)  # the user asked for this cache to be trusted
    if unusable is not None:
        raise UnreadableCacheError(
            f"{_shown(path)} {unusable}, so it does not unpickle into a job: it was not trusted and "
            f"nothing changed. {RECOVER}"
        )
    _signing.sign(path, data)
    return describe(path)


def quarantine(path: Path) -> Path:
    """Move an unreadable cache file aside in its folder (never delete it); returns where."""
    path = Path(path)
    stamp = _timefmt.local_stamp()
    for n in range(100):
        target = path.with_name(f"{path.name}.unreadable-{stamp}" + (f"-{n}" if n else ""))
        if not os.path.lexists(target):
            os.rename(path, target)
            _signing.remove(path)
            return target
    raise CacheError(f"could not move {_shown(path)} aside: too many unreadable copies next to it")


def dump_job(job: Any, path: Path) -> None:
    """Pickle ``job`` to ``path`` (following the context symlink), 0600, atomically."""
    real = _real(path)
    _files.private_dir(real.parent)
    data = pickle.dumps(job)
    _signing.sign(real, data)  # first: a reader between the two writes re-reads once
    _files.write_atomic(real, data, 0o600)


def remove(path: Path) -> None:
    """Delete the state file a context points to (not the symlink itself)."""
    real = _real(path)
    real.unlink(missing_ok=True)
    _signing.remove(real)


# ── one writer at a time ───────────────────────────────────────────────
_held: dict[str, int] = {}  # lock path -> depth held by this process
_held_guard = threading.RLock()


@contextmanager
def locked(monarch_dir: Path, create: bool = True) -> Iterator[None]:
    """Hold the folder's ``.monarch/.lock`` (re-entrant within this process).

    Waits while another process holds it, saying who after a second; Ctrl-C or
    ``MONARCH_JUPYTER_LOCK_TIMEOUT`` seconds (default 120) give up in one line. Without
    ``create``, a folder with no ``.monarch/`` yet is left as it is (nothing to guard).
    """
    monarch_dir = Path(monarch_dir)
    if not create and not monarch_dir.is_dir():
        yield
        return
    key = str(monarch_dir.absolute())
    with _held_guard:
        if _held.get(key):
            _held[key] += 1
            try:
                yield
            finally:
                _held[key] -= 1
            return
        _files.private_dir(monarch_dir)
        lock_path = monarch_dir / LOCK_FILE
        flags = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC
        try:
            fd = os.open(lock_path, flags, 0o600)
        except OSError as error:
            raise CacheError(
                f"cannot open the lock {_shown(lock_path)}: {error.strerror}; remove it"
            ) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise CacheError(
                    f"{_shown(lock_path)} is {_files.kind(os.fstat(fd).st_mode)}, not a regular file; remove it"
                )
            _wait_for_lock(fd, lock_path)
            _held[key] = 1
            try:
                yield
            finally:
                _held.pop(key, None)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


#: Where the one "waiting for the lock" line goes (the kernel's print: the running cell).
notify: Callable[[str], None] = functools.partial(print, flush=True)
_SAY_AFTER = 1.0
_POLL = 0.05
LOCK_TIMEOUT_VAR = "MONARCH_JUPYTER_LOCK_TIMEOUT"
_DEFAULT_LOCK_TIMEOUT = 120.0


class LockWaitInterrupted(Interrupted):
    """Ctrl-C while waiting for another process's ``.monarch/.lock``: nothing was done."""


def lock_holder(fd: int) -> str | None:
    """Who holds the ``flock`` on open file ``fd``: "pid N (command)"."""
    info = os.fstat(fd)
    pid = _procfs.flock_holder(info.st_dev, info.st_ino)
    if pid is None:
        return None
    words = " ".join(_procfs.cmdline(pid) or [])
    command = "".join(c if c.isprintable() else " " for c in words)[:120] or "command unknown"
    return f"pid {pid} ({command})"


def _lock_timeout() -> float:
    try:
        value = float(os.environ.get(LOCK_TIMEOUT_VAR, _DEFAULT_LOCK_TIMEOUT))
    except ValueError:
        return _DEFAULT_LOCK_TIMEOUT
    return value if 0 < value < 86400 else _DEFAULT_LOCK_TIMEOUT


def _wait_for_lock(fd: int, lock_path: Path) -> None:
    """Take the lock; after a second say once who holds it; Ctrl-C or the bound gives up (one line)."""
    start = time.monotonic()
    said = False
    bound = _lock_timeout()
    holder: str | None = None
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            waited = time.monotonic() - start
            if waited >= _SAY_AFTER and not said:
                said = True
                holder = lock_holder(fd)
                notify(
                    f"waiting for {_shown(lock_path)}, held by {holder or 'another process'}; "
                    f"Ctrl-C stops waiting (nothing is done then)"
                )
            if waited >= bound:
                raise CacheError(
                    f"{_shown(lock_path)} is still held by {lock_holder(fd) or 'another process'} "
                    f"after {bound:g} s: nothing was done; try again when it is done "
                    f"(%env {LOCK_TIMEOUT_VAR}=SECONDS waits longer)"
                )
            time.sleep(_POLL)
    except KeyboardInterrupt:
        raise LockWaitInterrupted(
            f"stopped waiting for {_shown(lock_path)} (held by {holder or lock_holder(fd) or 'another process'}): "
            "nothing was done"
        ) from None


def locked_method(method: F) -> F:
    """Run a session method holding the lock of its folder's ``.monarch/``."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with locked(self.layout.dir, create=method.__name__ in ("apply", "use")):
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
