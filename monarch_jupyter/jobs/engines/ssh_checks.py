"""SSHJob: the checks that start nothing, run before apply, and their one-line errors.

:func:`preflight` logs in to every host once (in parallel, interruptible) and checks
that its Python imports ``monarch`` of our version, so a host that refuses the key or
a Python without ``monarch`` is one line naming the host, not a failure ~60 s later in
some other cell.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ...errors import MonarchJupyterError
from ...system import procfs as _procfs
from ...system.files import private_dir, private_opener

PREFLIGHT_TIMEOUT = 30.0
POLL = 0.05

# Run on each host by preflight: which monarch, from where, on which Python.
_PROBE = (
    "import sys\n"
    "try:\n"
    "    from importlib.metadata import version\n"
    "    import monarch\n"
    "    v = version('torchmonarch')\n"
    "except Exception as e:\n"
    "    print('MJ-PROBE missing', sys.executable, type(e).__name__, e)\n"
    "else:\n"
    "    print('MJ-PROBE ok', sys.executable, v)\n"
)


class ApplyFailed(MonarchJupyterError):
    """An apply failed before or while starting workers; nothing was left running."""


def summary(text: str) -> str:
    """The last non-empty line of ``text``."""
    lines = [line.strip() for line in text.replace("\r", "").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def shown(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def append_log(log: Path, text: str) -> None:
    with open(log, "a", encoding="utf-8", opener=private_opener) as out:
        out.write(text.rstrip("\n") + "\n")


def tail(log: Path, size: int = 4000) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def ssh_hint(text: str) -> str:
    """ssh's last line, with what to do about the usual failures."""
    line = summary(text)
    lowered = text.lower()
    if (
        "host key verification failed" in lowered
        or "no ed25519 host key is known" in lowered
        or "host key for" in lowered
    ):
        return f"{line}: the host key is unknown or changed; add it to known_hosts (ssh HOST once) or fix the ssh config"
    if "permission denied" in lowered:
        return f"{line}: the key was refused; check User/IdentityFile in your ssh config"
    if (
        "could not resolve" in lowered
        or "connection refused" in lowered
        or "timed out" in lowered
        or "no route" in lowered
    ):
        return f"{line}: the host is unreachable; check its name, port and that sshd runs"
    return line


def _start_probes(
    hosts: Sequence[str],
    ssh_args: Sequence[str],
    command: str,
    log: Path,
    probes: dict[str, subprocess.Popen[bytes]],
    outputs: dict[str, Path],
) -> None:
    """One ssh per host, filled into ``probes`` and ``outputs`` as each starts (the caller reaps)."""
    for host in hosts:
        out = log.with_name(f"{log.stem}.{host}.probe")
        outputs[host] = out
        with open(out, "wb", opener=private_opener) as sink:
            probes[host] = subprocess.Popen(
                ["ssh", *ssh_args, host, "-n", command],
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )


def _check_answer(host: str, rc: int, text: str, python: str, expect_version: str, log: Path) -> None:
    """ApplyFailed unless the probe's output says this host's Python has our torchmonarch."""
    found = [line for line in text.replace("\r", "").splitlines() if line.startswith("MJ-PROBE ")]
    if rc == 255 or (not found and rc != 0):
        raise ApplyFailed(f"ssh to {host} failed: {ssh_hint(text)} (log: {shown(log)})")
    if not found:
        raise ApplyFailed(f"{host}: {python} printed no answer: {summary(text)} (log: {shown(log)})")
    word, exe, rest = [*found[-1].split(" ", 3), "", ""][1:4]
    if word == "missing":
        raise ApplyFailed(
            f"{host}: {python} ({exe}) cannot import monarch ({rest.strip()}): "
            f"pip install torchmonarch=={expect_version} there, or pass python_exe= a Python that has it "
            f"(log: {shown(log)})"
        )
    if rest.strip() != expect_version:
        raise ApplyFailed(
            f"{host}: {python} ({exe}) has torchmonarch {rest.strip()}, this kernel has {expect_version}: "
            f"install torchmonarch=={expect_version} there (log: {shown(log)})"
        )


def preflight(
    hosts: Sequence[str],
    ssh_args: Sequence[str],
    python: str,
    log: Path,
    expect_version: str | None = None,
    timeout: float = PREFLIGHT_TIMEOUT,
    progress: Callable[[str], None] | None = None,
) -> None:
    """Log in to every host once and check its Python; ApplyFailed names the first bad host.

    ``ssh_args`` are the job's (with ``-tt``: killing an interrupted probe ends its remote
    side too). Runs on the caller's thread and polls, so Ctrl-C kills the probes at once.
    """
    if expect_version is None:
        from importlib.metadata import version

        expect_version = version("torchmonarch")
    command = f"{shlex.quote(python)} -c {shlex.quote(_PROBE)}"
    private_dir(log.parent)
    probes: dict[str, subprocess.Popen[bytes]] = {}
    outputs: dict[str, Path] = {}
    try:
        _start_probes(hosts, ssh_args, command, log, probes, outputs)
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p in probes.values()):
            if time.monotonic() > deadline:
                slow = [h for h, p in probes.items() if p.poll() is None]
                append_log(log, f"no answer from {', '.join(slow)} within {timeout:g} s")
                raise ApplyFailed(
                    f"ssh {slow[0]} did not answer within {timeout:g} s: check the host name and the network "
                    f"(log: {shown(log)})"
                )
            time.sleep(POLL)
        for host, proc in probes.items():
            text = outputs[host].read_text(errors="replace")
            append_log(log, f"--- preflight {host} (ssh rc {proc.returncode}) ---\n{text}")
            _check_answer(host, proc.returncode, text, python, expect_version, log)
        if progress is not None:
            progress(f"preflight ok on {', '.join(probes)}")
    finally:
        for proc in probes.values():
            if proc.poll() is None:
                _procfs.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for out in outputs.values():
            out.unlink(missing_ok=True)
