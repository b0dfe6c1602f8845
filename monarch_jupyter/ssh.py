"""SSHJob from a notebook: the checks and fixes Monarch's ``SSHJob`` needs around apply.

Monarch's ``SSHJob`` (``monarch._src.job.job``, not exported) starts one
``ssh HOST -n "<python> -c run_worker_loop_forever(...)"`` client per host and
returns from ``state()`` before any worker answered, so a host that refuses the
key, a Python without ``monarch`` or a dead ssh client only shows up ~60 s later
in some other cell. Here, around the start:

- :func:`prepare` adds ``-tt`` to ``ssh_args`` (without a tty, killing the ssh
  client leaves the remote worker running) and picks a transport address the
  client can bind when this machine's hostname resolves only to loopback;
- :func:`preflight` logs in to every host once (in parallel, interruptible) and
  checks that its Python imports ``monarch`` of our version;
- :func:`wait_ready` watches the ssh clients until every worker listens,
  turning a dying client into one line naming the host and the log file;
- :func:`restore` re-enables the job's transport after unpickling (SlurmJob has
  a ``__setstate__`` for that; SSHJob has none).

Besides what :mod:`._introspect` reads (meshes, ssh client PIDs), SSHJob's
constructor arguments are read here (``_ssh_args``, ``_python_exe``, ``_port``,
``_transport``); Monarch has no public accessor for them.
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

from . import _introspect
from .errors import MonarchJupyterError

LOOPBACK_FIX = 'monarch.config.configure(default_transport="tcp://127.0.0.1:0")'
PREFLIGHT_TIMEOUT = 30.0
READY_TIMEOUT = 60.0
_POLL = 0.05

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


def is_ssh_job(job: Any) -> bool:
    return any(cls.__name__ == "SSHJob" for cls in type(job).__mro__)


def hosts(job: Any) -> dict[str, list[str]]:
    """Mesh name → host names of an SSHJob (``add_mesh`` order)."""
    meshes = _introspect.declared_meshes(job) or {}
    return {str(name): list(value) for name, value in meshes.items() if isinstance(value, (list, tuple))}


def all_hosts(job: Any) -> list[str]:
    seen: list[str] = []
    for names in hosts(job).values():
        seen += [h for h in names if h not in seen]
    return seen


# ── before anything starts ──────────────────────────────────────────────
def prepare(job: Any) -> list[str]:
    """Fix what can be fixed on the job before ``can_run``/apply; returns notes for the user."""
    notes = []
    args = tuple(getattr(job, "_ssh_args", ()) or ())
    if "-tt" not in args and "-t" not in args:
        job._ssh_args = ("-tt", *args)
        notes.append("added -tt to ssh_args: without a tty, %job kill would stop the ssh clients but not the remote workers")
    return notes


def _loopback_only(name: str) -> bool:
    try:
        infos = socket.getaddrinfo(name, None)
    except OSError:
        return True
    addresses = {info[4][0] for info in infos}
    return all(ipaddress.ip_address(a.split("%")[0]).is_loopback or ipaddress.ip_address(a.split("%")[0]).is_link_local
               for a in addresses)


def _is_loopback_host(host: str) -> bool:
    """Whether ``host`` is this machine's loopback (an address, or a name resolving only there)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False  # unknown here; it may be an alias in the user's ssh config
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def choose_transport(job: Any) -> str | None:
    """Make the client bindable when this machine's hostname resolves only to loopback.

    Monarch's tcp transport then panics (a ``PanicException``, a BaseException) while
    creating the client. When every host of the job is a loopback address the
    client can listen on 127.0.0.1, and we configure that (returning a note);
    otherwise the user must name an address the hosts can reach: ApplyFailed.
    """
    if getattr(job, "_transport", "tcp") != "tcp" or not _loopback_only(socket.gethostname()):
        return None
    if all(_is_loopback_host(h) for h in all_hosts(job)):
        import monarch.config

        monarch.config.configure(default_transport="tcp://127.0.0.1:0")
        return None
    raise ApplyFailed(
        f"this machine's hostname {socket.gethostname()!r} resolves only to loopback, so remote hosts "
        f"could not reach this kernel: add {LOOPBACK_FIX.replace('127.0.0.1', 'ADDRESS')} with an address "
        "the hosts can reach, after building the job (or fix /etc/hosts)"
    )


def restore(job: Any) -> None:
    """After unpickling: re-enable the job's transport (SSHJob has no ``__setstate__`` for it)."""
    if not is_ssh_job(job):
        return
    from monarch._src.actor.actor_mesh import enable_transport  # private: the public one is the same function

    enable_transport(getattr(job, "_transport", "tcp"))
    try:
        choose_transport(job)
    except ApplyFailed:
        pass  # re-attaching then fails with Monarch's own message; apply explains it


# ── worker addresses this process has connected to ──────────────────────
# Monarch 0.7 cannot connect one client to a new worker at an address it already
# used (host:port): the connection fails after ~60 s ("config push failed").
_used: set[tuple[str, int]] = set()


def remember_addresses(job: Any) -> None:
    """Note the job's worker addresses as used by this process (after start or re-attach)."""
    port = int(getattr(job, "_port", 0) or 0)
    _used.update((host, port) for host in all_hosts(job))


def check_addresses(job: Any) -> None:
    """ApplyFailed at once, instead of a failure ~60 s later, for a host:port used before here."""
    port = int(getattr(job, "_port", 0) or 0)
    reused = [host for host in all_hosts(job) if (host, port) in _used]
    if reused:
        raise ApplyFailed(
            f"{reused[0]}:{port} already served an earlier job in this kernel and Monarch cannot connect to "
            "a new worker there from the same process: restart the kernel (the job cache survives it), "
            "or use another port (SSHJob monarch_port=…, or --port)"
        )


# ── preflight: one login per host ───────────────────────────────────────
def _probe_args(job: Any) -> list[str]:
    """The job's ssh_args (with ``-tt``: killing an interrupted probe ends its remote side too)."""
    return list(getattr(job, "_ssh_args", ()) or ())


def _summary(text: str) -> str:
    lines = [line.strip() for line in text.replace("\r", "").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def preflight(job: Any, log: Path, expect_version: str | None = None,
              timeout: float = PREFLIGHT_TIMEOUT, progress: Callable[[str], None] | None = None) -> None:
    """Log in to every host once and check its Python; ApplyFailed names the first bad host.

    Runs on the caller's thread and polls, so Ctrl-C kills the probes at once.
    """
    python = getattr(job, "_python_exe", "python")
    if expect_version is None:
        from importlib.metadata import version

        expect_version = version("torchmonarch")
    command = f"{shlex.quote(python)} -c {shlex.quote(_PROBE)}"
    probes: dict[str, subprocess.Popen] = {}
    outputs: dict[str, Path] = {}
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        for host in all_hosts(job):
            out = log.with_name(f"{log.stem}.{host}.probe")
            outputs[host] = out
            with open(out, "wb") as sink:
                probes[host] = subprocess.Popen(
                    ["ssh", *_probe_args(job), host, "-n", command],
                    stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p in probes.values()):
            if time.monotonic() > deadline:
                slow = [h for h, p in probes.items() if p.poll() is None]
                _log(log, f"no answer from {', '.join(slow)} within {timeout:g} s")
                raise ApplyFailed(
                    f"ssh {slow[0]} did not answer within {timeout:g} s: check the host name and the network "
                    f"(log: {_shown(log)})"
                )
            time.sleep(_POLL)
        for host, proc in probes.items():
            text = outputs[host].read_text(errors="replace")
            _log(log, f"--- preflight {host} (ssh rc {proc.returncode}) ---\n{text}")
            found = [line for line in text.replace("\r", "").splitlines() if line.startswith("MJ-PROBE ")]
            if proc.returncode == 255 or not found and proc.returncode != 0:
                raise ApplyFailed(f"ssh to {host} failed: {_ssh_hint(text)} (log: {_shown(log)})")
            if not found:
                raise ApplyFailed(f"{host}: {python} printed no answer: {_summary(text)} (log: {_shown(log)})")
            word, exe, rest = (found[-1].split(" ", 3) + ["", ""])[1:4]
            if word == "missing":
                raise ApplyFailed(
                    f"{host}: {python} ({exe}) cannot import monarch ({rest.strip()}): "
                    f"pip install torchmonarch=={expect_version} there, or pass python_exe= a Python that has it "
                    f"(log: {_shown(log)})"
                )
            if rest.strip() != expect_version:
                raise ApplyFailed(
                    f"{host}: {python} ({exe}) has torchmonarch {rest.strip()}, this kernel has {expect_version}: "
                    f"install torchmonarch=={expect_version} there (log: {_shown(log)})"
                )
        if progress is not None:
            progress(f"preflight ok on {', '.join(probes)}")
    finally:
        for proc in probes.values():
            if proc.poll() is None:
                _kill_group(proc.pid)
                proc.wait()
        for out in outputs.values():
            out.unlink(missing_ok=True)


def _ssh_hint(text: str) -> str:
    line = _summary(text)
    lowered = text.lower()
    if "host key verification failed" in lowered or "no ed25519 host key is known" in lowered \
            or "host key for" in lowered:
        return f"{line}: the host key is unknown or changed; add it to known_hosts (ssh HOST once) or fix the ssh config"
    if "permission denied" in lowered:
        return f"{line}: the key was refused; check User/IdentityFile in your ssh config"
    if "could not resolve" in lowered or "connection refused" in lowered or "timed out" in lowered \
            or "no route" in lowered:
        return f"{line}: the host is unreachable; check its name, port and that sshd runs"
    return line


# ── after state(): every worker up, or one line ─────────────────────────
def wait_ready(job: Any, log: Path, timeout: float = READY_TIMEOUT,
               progress: Callable[[str], None] | None = None, cancelled: Any = None) -> None:
    """Wait until each host's worker port accepts connections while its ssh client lives."""
    table = host_pids(job)
    port = int(getattr(job, "_port", 0) or 0)
    waiting = dict(table)
    deadline = time.monotonic() + timeout
    up: list[str] = []
    while waiting:
        if cancelled is not None and cancelled.is_set():
            raise ApplyFailed("cancelled while the workers started")
        for host, pid in list(waiting.items()):
            if not _alive(pid):
                raise ApplyFailed(
                    f"the ssh client for {host} exited before its worker came up: "
                    f"{_summary(_tail(log))} (log: {_shown(log)})"
                )
            if _listening(host, port):
                up.append(host)
                del waiting[host]
                if progress is not None:
                    progress(f"worker up on {host} ({len(up)}/{len(table)})")
        if not waiting:
            break
        if time.monotonic() > deadline:
            raise ApplyFailed(
                f"the workers on {', '.join(waiting)} did not listen on port {port} within {timeout:g} s "
                f"(log: {_shown(log)})"
            )
        time.sleep(_POLL * 2)


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


# ── helpers ─────────────────────────────────────────────────────────────
def host_pids(job: Any) -> dict[str, int]:
    """Host → local ssh client PID."""
    return _introspect.worker_pids(job)


def live_per_mesh(job: Any) -> dict[str, int]:
    """Mesh → hosts whose ssh client (and with ``-tt`` its worker) is alive."""
    pids = host_pids(job)
    return {name: sum(1 for h in names if _alive(pids.get(h))) for name, names in hosts(job).items()}


def _alive(pid: int | None) -> bool:
    return _introspect.pid_alive(pid)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def _log(log: Path, text: str) -> None:
    with open(log, "a", encoding="utf-8") as out:
        out.write(text.rstrip("\n") + "\n")


def _tail(log: Path, size: int = 4000) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _shown(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)
