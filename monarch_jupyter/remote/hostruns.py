"""Runs that outlive their reader: each rank's output is captured on its host. No Monarch.

A ``%%remote`` command writes its stdout and stderr straight to files in a run folder on its
host (``O_APPEND``, no pipe), so it neither blocks nor dies when the actor that started it goes
away with its kernel; whoever wants the output tails the files (inotify). Layout, per user and
host (``runs_root()``)::

    $TMPDIR/monarch_jupyter-runs-<uid>/            0700, or $MONARCH_JUPYTER_RUNS_DIR
        <run_id>/<key>.<rank>/                     one folder per rank (mesh name, flat rank)
            out, err      what the command printed, written by the command itself
            meta.json     command, target, started, pid (= process group), leader start time, marker
            status        "<rc> <end time>", written by a bash wrapper when the command ends,
                          even with no actor left (or by the actor that reaped it); no status and
                          no leader: killed (SIGKILL) or lost
            script        the command, when too long to pass inline
        .spare.<pid>.<n>/                          the next run's rank folder, made ahead by its actor
        .spare.<pid>.<n>.run/                      … and an empty folder to be that run's folder
        .free.<random>/                            a pruned rank folder, emptied, to be a spare again
        .freerun.<random>/                         a pruned run's folder, emptied, likewise

The command runs as ``( eval CMD )`` under a small bash wrapper (the process group leader) that
traps INT/TERM only to outlive its child and write the status; the subshell gets default signal
handling, so Ctrl-C behaves as before. Every process of the run carries
``MONARCH_JUPYTER_RUN=<run_id>`` in its environment: processes that left the group (``setsid``)
are found by it in ``/proc/<pid>/environ`` and stopped with the run.

Bounds: a run folder keeps at most ``MAX_KEEP`` bytes per stream and rank; older bytes are punched
out of the file (it stays sparse, offsets stay valid) by whoever is reading it on that host.
Finished runs beyond ``KEEP_RUNS`` or older than ``KEEP_SECONDS`` are pruned (their rank folders
emptied for reuse, up to ``KEEP_FREE``: see :func:`make_spare`). An idle finished run holds no
process and no open file descriptor.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import ctypes
import json
import os
import select
import shlex
import shutil
import signal
import socket
import stat
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import IO, Any

from .._files import read_small
from .process import GRACE, READ_SIZE, Process, ShellKeeper, _wait_exit, killpg, paced
from .protocol import ERR, OUT, Chunk

MARKER = "MONARCH_JUPYTER_RUN"
MAX_KEEP = 64 << 20  # bytes kept per stream and rank on the host (older bytes punched out)
REPLAY_BYTES = 256 << 10  # what an attach replays per stream before following, at most …
REPLAY_LINES = 200  # … and at most this many lines (the cell's live budget stays for what comes next)
KEEP_RUNS = 50  # finished runs kept per host (newest)
KEEP_SECONDS = 7 * 86400  # … and none older than this
POLL = 0.02  # when inotify is unavailable, and for exits we cannot wait on
LAST_BYTES = 1 << 20  # per stream and message once the command ended (a flood's rest: several messages)
BOUND_EVERY = 2.0  # seconds between bound checks while tailing
STATUS_WAIT = 0.5  # after a leader we did not start exits, how long its status may take to appear
SLICE = 0.00025  # while a quick command runs, how often its files are looked at for output
META = "meta.json"
STATUS = "status"
INLINE_MAX = 48_000  # longer commands go through a script file (the warm shell takes ≤ 60,000 bytes)


# ── where ──────────────────────────────────────────────────────────────
def runs_path() -> Path:
    """Where this user's runs folder is on this host (not created)."""
    custom = os.environ.get("MONARCH_JUPYTER_RUNS_DIR")
    return Path(custom) if custom else Path(tempfile.gettempdir()) / f"monarch_jupyter-runs-{os.getuid()}"


def runs_root() -> Path:
    """This user's runs folder on this host (created 0700; refused if someone else could write it).
    Checked on every call (one lstat when it is there: every run asks)."""
    root = runs_path()
    try:
        info = os.lstat(root)
    except FileNotFoundError:
        with contextlib.suppress(FileExistsError):
            root.mkdir(mode=0o700, parents="MONARCH_JUPYTER_RUNS_DIR" in os.environ)
        info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise RuntimeError(
            f"{root} is not a folder of ours that only we can write: remove it or fix it (chmod 700)"
        )
    return root


def rank_name(key: str, rank: int) -> str:
    return f"{key}.{rank}"


def check_run_id(run_id: str) -> str:
    if not run_id or "/" in run_id or run_id.startswith(".") or "\0" in run_id:
        raise ValueError(f"bad run id {run_id!r}")
    return run_id


def rank_dir(run_id: str, key: str, rank: int, root: Path | None = None) -> Path:
    return (root or runs_root()) / check_run_id(run_id) / rank_name(key, rank)


SPARE = ".spare."  # a rank folder made ahead: .spare.<pid of the actor>.<n>
FREE = ".free."  # a pruned rank folder, emptied, waiting to be the next spare: .free.<random>
FREE_RUN = ".freerun."  # a pruned run's folder, emptied, waiting to be the next spare's run folder
KEEP_FREE = 128  # emptied folders kept for reuse per host (4 empty files each)
_spares = 0


def make_spare(root: Path | None = None) -> Path:
    """A rank folder made ahead of its run (out, err, status and meta.json, empty): the run then
    costs a rename instead of a mkdir and four file creations (~0.3 ms each on ext4).

    It is a pruned run's folder, emptied (see :func:`prune`), when there is one: a host
    that runs many short commands then neither creates nor deletes files run after run. That
    matters on ext4 without a journal, where each new file skips, one block lookup each, every
    inode freed in the last seconds (``recently_deleted``): with a warm loop's churn that cost
    each worker ~3 ms of CPU a run (``benchmarks/bench_capture.py --churn``)."""
    global _spares
    root = root or runs_root()
    _spares += 1
    folder = root / f"{SPARE}{os.getpid()}.{_spares}"
    if _take_free(root, folder, FREE):
        return folder
    os.mkdir(folder, 0o700)
    try:
        for name in (OUT, ERR, STATUS, META):  # empty status, meta.json: read as none, as if absent
            os.close(os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def make_spare_run(spare: Path) -> Path:
    """An empty folder made ahead to become the run's folder of the rank folder ``spare``
    (:func:`place`): a rename on the run's path instead of a mkdir (~25 against ~150 µs on
    ext4, where a new folder is a new inode). A pruned run's folder when there is one."""
    folder = spare.with_name(spare.name + ".run")
    if _take_free(spare.parent, folder, FREE_RUN):
        if _empty_folder(folder):
            return folder
        shutil.rmtree(folder, ignore_errors=True)  # not as prune left it: never a run's folder
    os.mkdir(folder, 0o700)
    return folder


_free_seen: dict[tuple[Path, str], list[str]] = {}  # (runs root, prefix) → free names its last scan found


def _take_free(root: Path, folder: Path, prefix: str) -> bool:
    """Rename one of prune's emptied folders (``prefix``: FREE or FREE_RUN) to ``folder``; False
    when there is none left. The names come from one scan of ``root`` that serves the next
    spares too (each scan reads every run's folder: ~180 entries on a busy host)."""
    names = _free_seen.setdefault((root, prefix), [])
    for scanned in (False, True):
        while names:
            try:
                os.rename(root / names.pop(), folder)
                return True
            except OSError:  # another actor on this host took it first
                continue
        if scanned:
            return False
        try:
            with os.scandir(root) as entries:
                names.extend(e.name for e in entries if e.name.startswith(prefix))
        except OSError:
            return False
    return False


def _empty_for_reuse(rank: Path, root: Path) -> bool:
    """Make a pruned rank folder a free one (its four files emptied, anything else removed);
    False if it is not as we made it (then it is removed instead)."""
    try:
        with os.scandir(rank) as entries:
            names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        for name, is_dir in names:
            path = rank / name
            if name not in (OUT, ERR, STATUS, META):
                shutil.rmtree(path) if is_dir else os.unlink(path)
                continue
            # never follows a link, never waits on a FIFO, empties only a regular file
            fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return False
                os.ftruncate(fd, 0)
            finally:
                os.close(fd)
        os.rename(rank, root / f"{FREE}{os.urandom(6).hex()}")
        return True
    except OSError:
        return False


def place(folder: Path, spare: Path | None, spare_run: Path | None = None) -> None:
    """Make ``folder`` a rank's folder: the ``spare`` renamed to it when there is one, else
    created. Its run's folder is ``spare_run`` renamed, unless it is there already (another
    rank of this host made it: then ``spare_run`` is removed)."""
    if spare is not None:
        try:
            if spare_run is not None:
                try:  # onto a missing (or empty) folder only: never replaces another rank's
                    os.rename(spare_run, folder.parent)
                    spare_run = None
                except OSError:
                    pass
            if spare_run is not None:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(folder.parent, 0o700)
            os.rename(spare, folder)
            return
        except OSError:
            shutil.rmtree(spare, ignore_errors=True)
        finally:
            if spare_run is not None:
                with contextlib.suppress(OSError):
                    os.rmdir(spare_run)
    prepare(folder)


def _empty_folder(path: Path) -> bool:
    """A real folder (not a link) with nothing in it."""
    try:
        if path.is_symlink():
            return False
        with os.scandir(path) as entries:
            return next(entries, None) is None
    except OSError:
        return False


def _spare_owner_alive(spare: Path) -> bool:
    try:
        os.kill(int(spare.name[len(SPARE) :].split(".")[0]), 0)
        return True
    except (ValueError, ProcessLookupError):
        return False
    except OSError:
        return True


def prepare(folder: Path) -> None:
    """Create a rank's folder (0700; its out / err files are created by whoever opens them first)."""
    try:
        os.mkdir(folder, 0o700)
    except FileNotFoundError:  # the run's folder first (one per run, not per rank)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        pass


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def read_json(path: Path, limit: int = 1 << 20) -> dict | None:
    """A small JSON object from a file, or None (missing, not a regular file, too big, corrupt): never blocks."""
    raw = read_small(path, limit)
    try:
        data = json.loads(raw or b"null")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def read_status(folder: Path) -> tuple[int, float] | None:
    """``(returncode, ended)`` from the status file, or None while there is none (or it is torn)."""
    try:  # never waits on a FIFO, never follows a link
        words = (read_small(folder / STATUS, 4096) or b"").split()
        return int(words[0]), float(words[1]) if len(words) > 1 else 0.0
    except (OSError, ValueError, IndexError):
        return None


def write_status(folder: Path, returncode: int, ended: float | None = None) -> None:
    """The status the wrapper would have written (used by the actor that reaped a killed leader)."""
    if read_status(folder) is None:
        with contextlib.suppress(OSError):  # a FIFO or a link there is left alone, never waited on
            fd = os.open(
                folder / STATUS,
                os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                0o600,
            )
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    os.ftruncate(fd, 0)
                    os.write(fd, f"{returncode} {ended or time.time()}\n".encode())
            finally:
                os.close(fd)


def write_meta(folder: Path, meta: dict) -> None:
    """One write of a fresh file (readers take a torn one as absent): cheaper than a rename."""
    fd = os.open(folder / META, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, json.dumps(meta).encode())
    finally:
        os.close(fd)


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (tells a reused pid apart), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def leader_alive(meta: dict | None) -> bool:
    """Whether the run's leader (the wrapper) is still the live process it was (not a zombie)."""
    if not meta or not meta.get("pid"):
        return False
    pid = int(meta["pid"])
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    if fields[0] in ("Z", "X"):
        return False
    ticks = meta.get("start_ticks")
    return ticks is None or int(fields[19]) == int(ticks)


# ── the wrapper: a shell forked ahead ──────────────────────────────────
# The leader waits with INT/TERM trapped (only so that it outlives its child and writes the status);
# the subshell, forked before the command is known, reads the run's script from fd {a} (the output
# redirected to the rank's files, the marker exported, the command) and runs it with default
# signals, as ``bash -c`` would; the leader then reads where the status goes from fd {b} (to its EOF). A signal's
# death is re-raised, so the parent sees the same exit as before.
RUN_PROLOGUE = (
    "trap : INT TERM\n"
    "( exec {b}<&-; . /dev/fd/{a} )\n"
    "__monarch_rc=$?\n"
    "exec {a}<&-\n"
    "read -r -N 65536 __monarch_status <&{b}\n"
    "if [ $__monarch_rc -gt 128 ] && [ $__monarch_rc -lt 193 ]; then __monarch_rc=$((128 - __monarch_rc)); fi\n"
    '[ -n "$__monarch_status" ] && printf \'%s %s\\n\' $__monarch_rc $EPOCHREALTIME > "$__monarch_status"\n'
    "if [ $__monarch_rc -lt 0 ]; then trap - INT TERM; kill -s $((-__monarch_rc)) $$; fi\n"
    "exit $__monarch_rc\n"
)
PAYLOAD_MAX = 60_000  # bytes written to the empty pipe at once (it holds 64 KiB)


def payload(folder: Path, run_id: str, mode: str, command: str, fd: int, python: str = sys.executable) -> str:
    """The script the forked subshell sources: output to the rank's files, the run's marker
    exported, then the command (from a script file in the rank's folder when it is long)."""
    q = shlex.quote
    inline = len(command.encode("utf-8", "surrogateescape")) <= INLINE_MAX and "\0" not in command
    head = f"exec {fd}<&-; exec >>{q(str(folder / OUT))} 2>>{q(str(folder / ERR))}; export {MARKER}={q(run_id)}; "
    if inline:  # one line, so the command's $LINENO and error messages count from 1 as with bash -c
        run = (
            f'exec {q(python)} -u -c "$__monarch_user"'
            if mode == "python"
            else 'eval "unset __monarch_user; $__monarch_user"'
        )
        return head + f"__monarch_user={ansi_c_quote(command)}; {run}\n"
    else:
        script = folder / ("script.py" if mode == "python" else "script.sh")
        with open(script, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(command)
    return head + (
        f"exec {q(python)} -u {q(str(script))}\n" if mode == "python" else f"exec bash {q(str(script))}\n"
    )


_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def ansi_c_quote(text: str) -> str:
    """``$'…'`` quoting: the string on one line (newlines and control characters escaped)."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch < " " or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


class RunShell:
    """A leader bash and its subshell, started with some env and cwd, waiting for a run."""

    def __init__(self, env: dict[str, str], cwd: str | None, spare: bool = False) -> None:
        import subprocess

        self.env = env
        self.cwd = cwd
        self.spare = make_spare() if spare else None  # the next run's folder, made ahead
        self.spare_run: Path | None = None  # … and its run's folder
        if self.spare is not None:
            with contextlib.suppress(OSError):  # then the run's folder is made on its path
                self.spare_run = make_spare_run(self.spare)
        a_read, self.a_write = os.pipe()
        b_read, self.b_write = os.pipe()
        try:
            self.popen = subprocess.Popen(
                ["bash", "-c", RUN_PROLOGUE.format(a=a_read, b=b_read)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=cwd,
                start_new_session=True,
                pass_fds=(a_read, b_read),
            )
        except BaseException:
            os.close(self.a_write)
            os.close(self.b_write)
            self._remove_spares()
            raise
        finally:
            os.close(a_read)
            os.close(b_read)
        self.fd = a_read  # its number in the shell

    def take(self, folder: Path, run_id: str, mode: str, command: str) -> CapturedProcess | None:
        """Hand the run to the shell, in rank folder ``folder`` (made now, or renamed from the
        spare made ahead): its :class:`CapturedProcess`, or None (then discarded)."""
        spare, self.spare = self.spare, None
        spare_run, self.spare_run = self.spare_run, None
        try:
            place(folder, spare, spare_run)
        except BaseException:
            self.discard()
            raise
        try:
            text = payload(folder, run_id, mode, command, self.fd).encode("utf-8", "surrogateescape")
            if len(text) > PAYLOAD_MAX or self.popen.poll() is not None:
                raise OSError("not usable")
            os.write(self.a_write, text)
            os.write(
                self.b_write, os.fsencode(str(folder / STATUS))
            )  # read to EOF (-N: in one read, not byte by byte)
        except OSError:
            self.discard()
            return None
        self._close_pipes()
        return CapturedProcess(self.popen, folder)

    def _close_pipes(self) -> None:
        for name in ("a_write", "b_write"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)

    def _remove_spares(self) -> None:
        if self.spare is not None:
            shutil.rmtree(self.spare, ignore_errors=True)
            self.spare = None
        if self.spare_run is not None:
            with contextlib.suppress(OSError):
                os.rmdir(self.spare_run)
            self.spare_run = None

    def discard(self) -> None:
        self._remove_spares()
        self._close_pipes()  # the subshell sources nothing, the leader writes no status: both exit
        if self.popen.returncode is None:
            killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.popen.wait(0.5)


class RunShellKeeper(ShellKeeper):
    """Keeps one :class:`RunShell` ready, started with the env and cwd of the last run (see
    :class:`~.process.ShellKeeper`): a run then costs no fork or exec on its path."""

    def __init__(self, delay: float = 0.003) -> None:
        super().__init__(delay, make=lambda env, cwd: RunShell(env, cwd, spare=True))

    def take(  # type: ignore[override]
        self, folder: Path, run_id: str, mode: str, command: str, env: dict[str, str], cwd: str | None
    ) -> CapturedProcess:
        proc = self._take_warm(env, cwd, folder, run_id, mode, command)
        if proc is None:
            proc = RunShell(env, cwd).take(folder, run_id, mode, command)
            if proc is None:
                raise RuntimeError("bash did not take the command")
        return proc


# ── inotify and hole punching, through libc ────────────────────────────
_IN_MODIFY = 0x2
_libc: Any = None


def _lib() -> Any:
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.inotify_init1, _libc.inotify_add_watch, _libc.fallocate  # noqa: B018 (present?)
        except (OSError, AttributeError):
            _libc = False
    return _libc


def inotify_fd(paths: list[Path]) -> int | None:
    """A non-blocking inotify fd watching ``paths`` for writes, or None (then poll)."""
    lib = _lib()
    if not lib:
        return None
    fd = lib.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        return None
    for path in paths:
        if lib.inotify_add_watch(fd, os.fsencode(str(path)), _IN_MODIFY) < 0:
            os.close(fd)
            return None
    return fd


_closer: Any = None


def close_soon(fd: int) -> None:
    """Close an inotify fd on a helper thread, once the running loop (if any) is through with what
    it is doing (answering a run): such a close waits for an RCU grace period (often 0.1 ms, up to
    ~15 ms on a busy host), which must not hold up the answer."""
    try:
        asyncio.get_running_loop().call_soon(_close_on_thread, fd)
    except RuntimeError:  # no loop
        _close_on_thread(fd)


def _close_on_thread(fd: int) -> None:
    global _closer
    if _closer is None:
        from concurrent.futures import ThreadPoolExecutor

        _closer = ThreadPoolExecutor(1, thread_name_prefix="monarch-jupyter-close")
    try:
        _closer.submit(os.close, fd)
    except RuntimeError:  # interpreter shutting down
        os.close(fd)


def punch_head(fd: int, keep: int = MAX_KEEP) -> int:
    """Free all but the last ``keep`` bytes of the file (a hole: size and offsets stay); the offset
    where kept data starts."""
    size = os.fstat(fd).st_size
    cut = (size - keep) // 4096 * 4096
    if cut <= 0:
        return 0
    lib = _lib()
    if lib:
        lib.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
        lib.fallocate(fd, 0x02 | 0x01, 0, cut)  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
    return cut


# ── tailing ────────────────────────────────────────────────────────────
class _Stream:
    __slots__ = ("bounded_at", "decoder", "fd", "path", "sink", "skipped", "stream")

    def __init__(self, stream: str, path: Path, offset: int | None, lines: int | None = None) -> None:
        self.stream = stream
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.sink: IO[bytes] | None = None
        self.bounded_at = 0.0
        size = os.fstat(self.fd).st_size
        start = 0 if offset is None else max(0, size - offset)
        if offset is not None and start > 0:  # replay from the start of a line
            os.lseek(self.fd, start - 1, os.SEEK_SET)
            head = os.read(self.fd, 1 << 16)
            cut = head.find(b"\n")
            start = start + cut if cut >= 0 else start - 1 + len(head)
        if lines is not None and size > start:  # … and only the last ``lines`` lines of that
            window = os.pread(self.fd, size - start, start)
            end = len(window) - 1 if window.endswith(b"\n") else len(window)
            for _ in range(lines):
                end = window.rfind(b"\n", 0, end)
                if end < 0:
                    break
            if end >= 0:
                start += end + 1
        with contextlib.suppress(OSError):  # skip a punched-out head (ENXIO: no data after start)
            start = max(start, os.lseek(self.fd, start, os.SEEK_DATA))
        os.lseek(self.fd, start, os.SEEK_SET)
        self.skipped = start  # bytes not replayed


class Tail:
    """Follows a rank's ``out`` and ``err`` files: :class:`~.protocol.Chunk` batches as they grow.

    ``replay``: None reads from the beginning; a byte count starts that far from the end (at a line
    start), and ``lines`` keeps only that many lines of it. Woken by inotify (polls when there is none). Call :meth:`close` when done: it frees
    every fd.
    """

    def __init__(self, folder: Path, replay: int | None = None, lines: int | None = None) -> None:
        self.folder = folder
        self.streams: list[_Stream] = []
        try:
            for name in (OUT, ERR):
                self.streams.append(_Stream(name, folder / name, replay, lines))
        except OSError:
            self.close()
            raise
        self._batch: list[list] = []  # [stream, texts, newlines]
        self._size = 0
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._notify: int | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._paused = False
        self.closed = False

    @property
    def skipped(self) -> int:
        return sum(s.skipped for s in self.streams)

    def tee(self, out: IO[bytes] | None, err: IO[bytes] | None) -> None:
        self.streams[0].sink, self.streams[1].sink = out, err

    def _feed(self, s: _Stream, data: bytes, final: bool = False) -> None:
        if s.sink is not None and data:
            s.sink.write(data)
        text = s.decoder.decode(data, final=final)
        if text:
            batch = self._batch
            if batch and batch[-1][0] == s.stream:
                batch[-1][1].append(text)
                batch[-1][2] += data.count(b"\n")
            else:
                batch.append([s.stream, [text], data.count(b"\n")])
            self._size += len(text)
            self._wake.set()

    def read(self, limit: int = READ_SIZE) -> bool:
        """Read what the files hold now (up to ``limit`` bytes each); True if more is waiting."""
        more = False
        for s in self.streams:
            got = 0
            while got < limit:
                try:
                    data = os.read(s.fd, READ_SIZE)
                except OSError:
                    break
                if not data:
                    break
                got += len(data)
                self._feed(s, data)
            else:
                more = True
        return more

    def _bound(self) -> None:
        now = time.monotonic()
        for s in self.streams:
            if now - s.bounded_at > BOUND_EVERY:
                s.bounded_at = now
                try:
                    if os.fstat(s.fd).st_size > MAX_KEEP + (1 << 20):
                        wfd = os.open(s.path, os.O_WRONLY | os.O_CLOEXEC)
                        try:
                            cut = punch_head(wfd)
                        finally:
                            os.close(wfd)
                        if os.lseek(s.fd, 0, os.SEEK_CUR) < cut:
                            os.lseek(s.fd, cut, os.SEEK_SET)
                except OSError:
                    pass

    def _readable(self) -> None:
        if self._notify is not None:
            try:
                while os.read(self._notify, 4096):
                    pass
            except OSError:
                pass
        if self.closed:
            return
        if self._size >= LAST_BYTES:  # the reader has not taken the last batch: wait for it
            self._paused = True
            return
        if self.read():
            self._loop.call_soon(self._readable)
        self._bound()

    def _tick(self) -> None:
        self._timer = None
        self._readable()
        if not self.closed:
            self._timer = self._loop.call_later(POLL, self._tick)

    def notify_fd(self) -> int | None:
        """The inotify fd that wakes on writes to the files (created now if need be; :meth:`watch`
        then uses it), or None where there is no inotify."""
        if self._notify is None and not self.closed:
            self._notify = inotify_fd([s.path for s in self.streams])
        return self._notify

    def written(self) -> bool:
        """Whether a file holds bytes not read yet (cheap: one fstat per stream)."""
        for s in self.streams:
            try:
                if os.fstat(s.fd).st_size > os.lseek(s.fd, 0, os.SEEK_CUR):
                    return True
            except OSError:
                pass
        return False

    def watch(self) -> None:
        """Start following on the running loop (once)."""
        if self._loop is not None or self.closed:
            return
        self._loop = asyncio.get_running_loop()
        self.notify_fd()
        if self._notify is not None:
            self._loop.add_reader(self._notify, self._readable)
        else:
            self._timer = self._loop.call_later(POLL, self._tick)
        self._readable()  # what was written before the watch

    def take(self) -> list[Chunk]:
        if not self._batch:
            return []
        chunks = [Chunk(stream, "".join(texts), newlines) for stream, texts, newlines in self._batch]
        self._batch, self._size = [], 0
        if self._paused and self._loop is not None and not self.closed:
            self._paused = False
            self._loop.call_soon(self._readable)
        return chunks

    def batches(self, every: float, max_bytes: int, quiet: float) -> AsyncIterator[list[Chunk]]:
        """As :meth:`.process.Process.batches`."""
        self.watch()
        return paced(self._wake, lambda: self._size, self.take, every, max_bytes, quiet)

    def finish(self, max_bytes: int | None = None) -> bool:
        """Read to the end now (at most ``max_bytes`` per stream: then True, call again after
        taking the batch) and flush the decoders (a last partial character)."""
        if max_bytes is not None:
            if self.read(max_bytes):
                return True
        else:
            while self.read():
                pass
        for s in self.streams:
            self._feed(s, b"", final=True)
        return False

    def close(self, soon: bool = False) -> None:
        """Free every fd; ``soon``: the inotify fd on a helper thread a moment later (see
        :func:`close_soon`), for a caller about to answer."""
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._notify is not None:
            if self._loop is not None:
                self._loop.remove_reader(self._notify)
            (close_soon if soon else os.close)(self._notify)
            self._notify = None
        for s in self.streams:
            if s.fd >= 0:
                os.close(s.fd)
                s.fd = -1


# ── a run we started: exit by pidfd, output from the files ─────────────
def _group_alive(pgid: int) -> bool:
    """Whether the group has a living (not zombie) member."""
    if not killpg(pgid, 0):
        return False
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _wait_exit_or_output(
    popen: Any, limit: float, tail: Tail, on_output: Callable[[], None] | None = None, slice_: float = SLICE
) -> None:
    """Block until ``popen`` exits or ``limit`` seconds pass. The first time output shows in
    ``tail``'s files (looked for every ``slice_`` seconds: a command that ends within the first
    costs nothing more), ``on_output()`` is called (it sends the first lines at once) and the
    wait goes on."""
    try:
        pidfd = os.pidfd_open(popen.pid)
    except (AttributeError, OSError):
        _wait_exit(popen, limit)
        return
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        now = time.monotonic()
        deadline = now + limit
        while now < deadline:
            if poller.poll(min(slice_, deadline - now) * 1000):
                return  # exited
            now = time.monotonic()
            if on_output is not None and tail.written():
                on_output()
                on_output = None
                now = time.monotonic()
    finally:
        os.close(pidfd)


class CapturedProcess(Process):
    """A :class:`~.process.Process` whose output goes to a rank folder's files, read by a
    :class:`Tail`. Same API: ``finish_now``, ``batches``, ``finish``, ``take``, ``stop``."""

    def __init__(self, popen: Any, folder: Path) -> None:  # no pipes: Process's state without them
        self.popen = popen
        self.pid = popen.pid
        self._pipes = []
        self._open = []
        self._exited = None
        self._stopping = None
        self._loop = None
        self.folder = folder
        self.tail = Tail(folder)

    def tee(self, out: IO[bytes] | None, err: IO[bytes] | None) -> None:
        self.tail.tee(out, err)

    def take(self) -> list[Chunk]:
        return self.tail.take()

    def _read_available(self) -> bool:
        self.tail.read()
        return True

    async def batches(
        self, every: float = 0.02, max_bytes: int = 1 << 20, quiet: float = 0.5
    ) -> AsyncIterator[list[Chunk]]:
        self._watch()
        async for chunks in self.tail.batches(every, max_bytes, quiet):
            yield chunks

    def _watch(self) -> None:
        super()._watch()
        self.tail.watch()

    def finish_now(self, limit: float, on_output: Callable[[], None] | None = None) -> int | None:
        """The return code if the command (and everything in its group) ends within ``limit``;
        ``on_output()`` is called when it first printed (the caller sends that at once)."""
        if self.popen.poll() is None:
            _wait_exit_or_output(self.popen, limit, self.tail, on_output)
            if self.popen.poll() is None:
                return None
        if killpg(self.pid, 0) and _group_alive(self.pid):  # background children: the slow path
            return None
        self._ended()
        if self.tail.finish(LAST_BYTES):  # a flood: the rest goes in several messages (slow path)
            return None
        self.tail.close()
        return self.popen.returncode

    def _ended(self) -> None:
        if self.popen.returncode is not None and self.popen.returncode < 0:
            write_status(self.folder, self.popen.returncode)  # killed: the wrapper could not say

    def rest(self, max_bytes: int = LAST_BYTES) -> Iterator[list[Chunk]]:
        """After :meth:`finish`: what is left in the files, in batches of at most ``max_bytes`` per
        stream; the last batch (maybe empty) ends it, then the files are closed."""
        while self.tail.finish(max_bytes):
            yield self.tail.take()
        yield self.tail.take()
        self.tail.close(soon=True)  # the exit is sent next: its inotify close must not hold it up

    async def finish(self, drain: float = 0.5, grace: float = GRACE) -> int:
        """Wait for the exit; background children still there ``drain`` s later get SIGTERM, then
        SIGKILL. Then :meth:`rest` hands out what is left in the files.
        Cancelled (the actor is going away), the run is left running: only the files are closed.
        """
        self._watch()
        try:
            returncode = await asyncio.shield(self._exited)
            deadline = time.monotonic() + drain
            while _group_alive(self.pid) and time.monotonic() < deadline:
                await asyncio.sleep(POLL)
            if _group_alive(self.pid):
                killpg(self.pid, signal.SIGTERM)
                deadline = time.monotonic() + grace
                while _group_alive(self.pid) and time.monotonic() < deadline:
                    await asyncio.sleep(POLL)
            killpg(self.pid, signal.SIGKILL)
            self._ended()
        except BaseException:
            self.tail.close()
            raise
        return returncode

    def close(self) -> None:
        self.kill()
        self.tail.close()


# ── what a host knows about runs ───────────────────────────────────────
def marked_pids(run_ids: set[str] | None = None) -> dict[str, list[int]]:
    """Live processes carrying the marker of one of ``run_ids`` (any run: None), by run id."""
    found: dict[str, list[int]] = {}
    needle = MARKER.encode() + b"="
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        at = environ.find(needle)
        if at < 0 or (at > 0 and environ[at - 1] != 0):
            continue
        end = environ.find(b"\0", at)
        run_id = environ[at + len(needle) : end if end >= 0 else None].decode(errors="replace")
        if run_ids is not None and run_id not in run_ids:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    continue
        except OSError:
            continue
        found.setdefault(run_id, []).append(int(entry))
    return found


def pgid_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[2])
    except (OSError, ValueError, IndexError):
        return None


def outside(pids: list[int], groups: set[int]) -> list[int]:
    """The processes not in one of these (live) process groups: a run's strays."""
    return sorted(pid for pid in pids if pgid_of(pid) not in groups)


def rank_state(folder: Path) -> dict:
    """One rank's state from its folder: ``state`` is running / exited / lost."""
    meta = read_json(folder / META) or {}
    status = read_status(folder)
    out = {
        "rank_dir": folder.name,
        "pid": meta.get("pid"),
        "started": meta.get("started"),
        "host": meta.get("host"),
        "folder": str(folder),
    }
    if status is not None:
        out.update(state="exited", returncode=status[0], ended=status[1])
    elif leader_alive(meta):
        out.update(state="running")
    else:
        out.update(state="lost")  # killed with SIGKILL (no status), or it never started
    for name in (OUT, ERR):
        try:
            out[f"{name}_bytes"] = os.stat(folder / name).st_size
        except OSError:
            out[f"{name}_bytes"] = 0
    return out


def host_state(run_ids: list[str], root: Path | None = None, strays: dict | None = None) -> dict[str, dict]:
    """``{run_id: {"ranks": {rank_dir: state}, "strays": [pid…]}}`` for the runs this host holds
    (a run it does not hold is absent). ``strays``: :func:`marked_pids` if already known."""
    root = root or runs_root()
    result: dict[str, dict] = {}
    for run_id in run_ids:
        try:
            folder = root / check_run_id(run_id)
            ranks = {p.name: rank_state(p) for p in sorted(folder.iterdir()) if p.is_dir()}
        except (OSError, ValueError):
            continue
        result[run_id] = {"ranks": ranks, "strays": []}
    if result:
        for run_id, pids in (marked_pids(set(result)) if strays is None else strays).items():
            if run_id in result:
                groups = {r["pid"] for r in result[run_id]["ranks"].values() if r["state"] == "running"}
                result[run_id]["strays"] = outside(pids, groups)
    return result


def _stray_pids(run_ids: set[str], leaders: set[int]) -> list[int]:
    return [pid for pids in marked_pids(run_ids).values() for pid in pids if pid not in leaders]


async def stop_runs(run_ids: list[str], grace: float = GRACE, root: Path | None = None) -> dict[str, int]:
    """Stop every process of these runs on this host: each rank's group SIGINT → SIGTERM → SIGKILL
    (as Ctrl-C), and every process carrying their marker (those that left the group too).
    Returns ``{run_id: processes signalled}``."""
    root = root or runs_root()
    wanted = {check_run_id(r) for r in run_ids}
    groups: dict[int, str] = {}
    for run_id in wanted:
        try:
            folders = [p for p in (root / run_id).iterdir() if p.is_dir()]
        except OSError:
            folders = []
        for folder in folders:
            meta = read_json(folder / META)
            if leader_alive(meta):
                groups[int(meta["pid"])] = run_id
    counts = {run_id: 0 for run_id in wanted}
    for run_id, pids in marked_pids(wanted).items():
        counts[run_id] += len(outside(pids, set(groups)))
    for run_id in groups.values():
        counts[run_id] += 1

    def alive() -> list[int]:
        left = [pgid for pgid in groups if _group_alive(pgid)]
        left += [pid for pid in _stray_pids(wanted, set(groups)) if pid not in groups]
        return left

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        for pgid in groups:
            killpg(pgid, sig)
        for pid in _stray_pids(wanted, set()):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        if sig == signal.SIGKILL:
            break
        deadline = time.monotonic() + grace
        while alive() and time.monotonic() < deadline:
            await asyncio.sleep(POLL)
        if not alive():
            break
    await asyncio.sleep(0)
    return counts


def prune(
    root: Path | None = None,
    keep: int = KEEP_RUNS,
    max_age: float = KEEP_SECONDS,
    now: float | None = None,
    min_age: float = 60.0,
) -> list[str]:
    """Remove finished runs beyond the newest ``keep`` or older than ``max_age``; the ids removed.
    A run is finished when no rank's leader is alive and no process carries its marker; one
    touched in the last ``min_age`` seconds is kept unless every rank wrote its status (without
    a status it may be starting: no meta.json yet). Settled runs go at once, so a tight loop of
    short runs does not pile up folders that every prune must walk."""
    root = root or runs_root()
    now = time.time() if now is None else now
    try:
        entries = entries_all = [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        return []
    for spare in [p for p in entries if p.name.startswith(SPARE)]:
        if not _spare_owner_alive(spare):  # its actor died before using it
            shutil.rmtree(spare, ignore_errors=True)
    try:
        entries = sorted(
            (p for p in entries if not p.name.startswith(".")), key=lambda p: p.stat().st_mtime, reverse=True
        )
    except OSError:
        return []
    finished = []
    settled = set()
    for folder in entries:
        ranks = [p for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []
        statuses = [read_status(r) for r in ranks]
        if any(s is None and leader_alive(read_json(r / META)) for r, s in zip(ranks, statuses, strict=True)):
            continue
        finished.append(folder)
        if ranks and all(s is not None for s in statuses):
            settled.add(folder)
    candidates = [
        f
        for i, f in enumerate(finished)
        if (i >= keep or now - f.stat().st_mtime > max_age)
        and (f in settled or now - f.stat().st_mtime > min_age)
    ]
    if not candidates:
        return []
    busy = marked_pids({f.name for f in candidates})
    free = sum(1 for p in entries_all if p.name.startswith(FREE))
    free_runs = sum(1 for p in entries_all if p.name.startswith(FREE_RUN))
    removed = []
    for folder in candidates:
        if folder.name in busy:
            continue
        with contextlib.suppress(OSError):
            for rank in folder.iterdir():  # emptied for reuse (see make_spare) while too few are
                if (
                    free < KEEP_FREE
                    and rank.is_dir()
                    and not rank.is_symlink()
                    and _empty_for_reuse(rank, root)
                ):
                    free += 1
        if free_runs < KEEP_FREE and _empty_folder(folder):  # its ranks all went to the free ones
            with contextlib.suppress(OSError):
                os.rename(folder, root / f"{FREE_RUN}{os.urandom(6).hex()}")
                free_runs += 1
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder.name)
    return removed


# ── following a run (ours or not) ──────────────────────────────────────
async def wait_leader(meta: dict | None, folder: Path) -> None:
    """Until the run's leader exited (or wrote its status)."""
    if read_status(folder) is not None or not leader_alive(meta):
        return
    pid = int(meta["pid"])
    loop = asyncio.get_running_loop()
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None and leader_alive(meta):  # still the same process after opening
        done = loop.create_future()
        loop.add_reader(pidfd, lambda: done.done() or done.set_result(None))
        try:
            await done
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)
        return
    if pidfd is not None:
        os.close(pidfd)
    while read_status(folder) is None and leader_alive(meta):
        await asyncio.sleep(POLL)


async def ended_status(folder: Path, meta: dict | None) -> tuple[int | None, float | None, str | None]:
    """After the leader exited: ``(returncode, duration, error)`` from the status file (which a
    parent that reaped a killed leader writes a moment later)."""
    deadline = time.monotonic() + STATUS_WAIT
    status = read_status(folder)
    while status is None and time.monotonic() < deadline:
        await asyncio.sleep(POLL)
        status = read_status(folder)
    started = (meta or {}).get("started")
    if status is None:
        return (
            None,
            (time.time() - started) if started else None,
            "killed or lost: it ended without an exit status",
        )
    returncode, ended = status
    return returncode, (ended - started) if started and ended else None, None


def replay_note(tail: Tail, folder: Path) -> str:
    """What an attach says before the kept tail when it does not start at the beginning."""
    return f"… {tail.skipped} earlier bytes are in {folder}/out and err on its host\n"


def hostname() -> str:
    return socket.gethostname()
