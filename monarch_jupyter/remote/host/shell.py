"""The warm wrapper shell: a bash forked ahead, waiting for the next run, and its keeper.

The command runs as ``( eval CMD )`` under a small bash wrapper (the process group leader) that
traps INT/TERM only to outlive its child and write the status; the subshell gets default signal
handling, so Ctrl-C behaves as ``bash -c`` would. Every process of the run carries
``MONARCH_JUPYTER_RUN=<run_id>`` in its environment: processes that left the group (``setsid``)
are found by it and stopped with the run; those that shed it too (``env -i``) stay below the
leader, a child subreaper, and are recorded when it ends (:mod:`.runs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from ...system import procfs as _procfs
from ..wire.protocol import ERR, OUT
from .capture import CapturedProcess
from .layout import MARKER, STATUS
from .spares import Spares, place, remove_spares

INLINE_MAX = 48_000  # longer commands go through a script file (the warm shell takes ≤ 60,000 bytes)
PAYLOAD_MAX = 60_000  # bytes written to the empty pipe at once (it holds 64 KiB)
PREWARM_DELAY = 0.003  # after a warm shell was taken (sooner delays the run that took it), before the next
QUIET_DELAY = 0.015  # … or this much later while runs come slowly: past the kernel's own work on the answer
SLOW_RUNS = 0.1  # runs are slow when the last one came at least this long after the one before


# ── the wrapper: a shell forked ahead ──────────────────────────────────
# The leader waits with INT/TERM trapped (only so that it outlives its child and writes the status);
# the leader is a child subreaper (:func:`_procfs.become_subreaper`): whatever the run orphans
# (``setsid cmd &`` in a subshell that exits) becomes its child, so when its subshell ends its
# children are the run's escapees, written to ``escaped`` before the status.
# The subshell, forked before the command is known, reads the run's script from fd {a} (the output
# redirected to the rank's files, the marker exported, the command) and runs it with default
# signals, as ``bash -c`` would; the leader then reads where the status goes from fd {b} (to its EOF). A signal's
# death is re-raised, so the parent sees the same exit as before.
RUN_PROLOGUE = (
    "trap : INT TERM\n"
    "( exec {b}<&-; . /dev/fd/{a} )\n"
    "__monarch_rc=$?\n"
    "read -r __monarch_kids < /proc/$$/task/$$/children\n"
    "exec {a}<&-\n"
    "read -r -N 65536 __monarch_status <&{b}\n"
    '[ -n "$__monarch_kids" ] && [ -n "$__monarch_status" ] && printf \'%s\\n\' "$__monarch_kids" > "${{__monarch_status%/*}}/escaped"\n'
    "if [ $__monarch_rc -gt 128 ] && [ $__monarch_rc -lt 193 ]; then __monarch_rc=$((128 - __monarch_rc)); fi\n"
    '[ -n "$__monarch_status" ] && printf \'%s %s\\n\' $__monarch_rc $EPOCHREALTIME > "$__monarch_status"\n'
    "if [ $__monarch_rc -lt 0 ]; then trap - INT TERM; kill -s $((-__monarch_rc)) $$; fi\n"
    "exit $__monarch_rc\n"
)


# ── the leader's start: a child subreaper without forking the worker ──
# The leader becomes a child subreaper without a Popen preexec_fn, which would fork() the whole
# worker at every shell (a Popen without one vforks; the costs: benchmarks/README.md, the worker
# side). So perl, Debian's essential perl-base, sets the flag and execs bash. Without perl, on
# another architecture, or where the call fails (probed once per process), the leader is forked
# with the preexec_fn as before.
_PRCTL_NR = {"x86_64": 157, "aarch64": 167}  # prctl(2)'s syscall number
_PERL_SUBREAPER = "syscall({nr}, {flag}, 1, 0, 0, 0) == 0 or exit 126; "
_PERL_EXEC_BASH = 'exec {"bash"} "bash", "-c", $ARGV[0]; exit 127'


_LEADER: dict[str, tuple[str, ...] | None] = {}  # perl_leader's one probe, per process


def perl_leader() -> tuple[str, ...] | None:
    """The argv prefix (``perl -e CODE --``) that starts the leader as a subreaper, or None.

    Cached in a plain dict, not with functools.cache: that wrapper pickles by reference, so a
    worker without monarch_jupyter could not rebuild this module (it travels by value)."""
    if "argv" not in _LEADER:
        _LEADER["argv"] = _probe_perl_leader()
    return _LEADER["argv"]


def _probe_perl_leader() -> tuple[str, ...] | None:
    nr, perl = _PRCTL_NR.get(platform.machine()), shutil.which("perl")
    if nr is None or perl is None:
        return None
    subreaper = _PERL_SUBREAPER.format(nr=nr, flag=_procfs.PR_SET_CHILD_SUBREAPER)
    try:
        ok = subprocess.run(
            [perl, "-e", subreaper + "exit 0"], stdin=subprocess.DEVNULL, capture_output=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (perl, "-e", subreaper + _PERL_EXEC_BASH, "--") if ok.returncode == 0 else None


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

    def __init__(self, env: dict[str, str], cwd: str | None, spares: Spares | None = None) -> None:
        self.env = env
        self.cwd = cwd
        self.spare = spares.make() if spares is not None else None  # the next run's folder, made ahead
        self.spare_run: Path | None = None  # … and its run's folder
        if spares is not None and self.spare is not None:
            with contextlib.suppress(OSError):  # then the run's folder is made on its path
                self.spare_run = spares.make_run(self.spare)
        a_read, self.a_write = os.pipe()
        b_read, self.b_write = os.pipe()
        prologue = RUN_PROLOGUE.format(a=a_read, b=b_read)
        perl = perl_leader()
        if perl is None:
            _procfs.load_prctl()  # loaded here, not in the forked child
        try:
            self.popen = subprocess.Popen(
                [*perl, prologue] if perl else ["bash", "-c", prologue],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=cwd,
                start_new_session=True,
                pass_fds=(a_read, b_read),
                preexec_fn=None if perl else _procfs.become_subreaper,
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
        remove_spares(self.spare, self.spare_run)
        self.spare = self.spare_run = None

    def discard(self) -> None:
        self._remove_spares()
        self._close_pipes()  # the subshell sources nothing, the leader writes no status: both exit
        if self.popen.returncode is None:
            _procfs.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.popen.wait(0.5)


class ShellKeeper:
    """Keeps one :class:`RunShell` ready, started with the env and cwd of the last run (a
    notebook runs the same kind of command again and again): a run then costs no fork or exec on
    its path. It owns the :class:`~.spares.Spares` its shells bring."""

    def __init__(self, delay: float = PREWARM_DELAY, quiet_delay: float = QUIET_DELAY) -> None:
        self.delay = delay
        self.quiet_delay = quiet_delay
        self.spares = Spares()
        self.shell: RunShell | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._last_take: float | None = None

    def take(
        self, folder: Path, run_id: str, mode: str, command: str, env: dict[str, str], cwd: str | None
    ) -> CapturedProcess:
        """Run ``command`` in rank folder ``folder``: in the warm shell if it was started with this
        env and cwd, else in one started now. Either way a shell for this env and cwd is started
        :meth:`next_delay` seconds later."""
        shell, self.shell = self.shell, None
        proc = None
        if shell is not None:
            if shell.env == env and shell.cwd == cwd:
                proc = shell.take(folder, run_id, mode, command)
            else:
                shell.discard()
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(self.next_delay(), self._prewarm, env, cwd)
        if proc is None:
            proc = RunShell(env, cwd).take(folder, run_id, mode, command)
            if proc is None:
                raise RuntimeError("bash did not take the command")
        return proc

    def next_delay(self, now: float | None = None) -> float:
        """How long after this take the next shell starts: ``quiet_delay`` while runs come slowly
        (as a user runs cells: starting a shell while the kernel still shows the answer slows that
        answer on a small host), ``delay`` for runs back to back."""
        now = time.monotonic() if now is None else now
        since, self._last_take = (None if self._last_take is None else now - self._last_take), now
        return self.quiet_delay if since is not None and since >= SLOW_RUNS else self.delay

    def _prewarm(self, env: dict[str, str], cwd: str | None) -> None:
        self._timer = None
        if self.shell is None:
            try:
                self.shell = RunShell(env, cwd, self.spares)
            except Exception:  # e.g. the cwd went away: no warm shell, the next run starts cold
                self.shell = None

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.shell is not None:
            self.shell.discard()
            self.shell = None
