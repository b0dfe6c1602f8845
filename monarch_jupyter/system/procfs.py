"""The one reader of ``/proc`` and the one signal escalation. Standard library only.

Imported by the kernel side and by the worker side alike (it travels to workers by value with
:mod:`monarch_jupyter.remote.host`), so it must import nothing but the standard library.

One zombie rule: a process in state ``Z`` (zombie) or ``X`` (dead) is not alive, whatever
``kill(pid, 0)`` says. ``/proc/<pid>/stat`` is split at the LAST ``)``: the command name
(``comm``) may hold spaces and parentheses.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

GRACE = 0.3  # seconds between SIGINT, SIGTERM and SIGKILL
POLL = 0.02  # how often a wait that has no pidfd (or a group, which has none) looks again
DEAD_STATES = ("Z", "X")
STOPPED_STATES = ("T", "t")  # stopped by a signal (SIGSTOP, SIGTSTP) or traced
ESCALATION = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)

# Indexes into the fields after ``comm`` (field 3 of proc(5) is index 0 here).
_STATE, _PGRP, _SESSION, _START_TIME = 0, 2, 3, 19


def parse_stat(text: str) -> list[str]:
    """The fields of a ``/proc/<pid>/stat`` line after ``pid (comm)``: ``[state, ppid, pgrp, …]``
    (``start_time``, field 22, is index 19). Raises ValueError on a line without ``)``."""
    _, paren, rest = text.rpartition(")")
    if not paren:
        raise ValueError("not a /proc/<pid>/stat line")
    return rest.split()


def stat_fields(pid: int) -> list[str] | None:
    """:func:`parse_stat` of the process's stat, or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return parse_stat(f.read())
    except (OSError, ValueError):
        return None


def state(pid: int) -> str | None:
    """The process's state letter (``R``, ``S``, ``Z``, …), or None when there is none."""
    fields = stat_fields(pid)
    return fields[_STATE] if fields else None


def fields_alive(fields: list[str] | None, ticks: int | None = None) -> bool:
    """Whether parsed stat ``fields`` are of a live process (not a zombie) that started at clock
    tick ``ticks`` when given (a reused pid started later)."""
    if not fields or fields[_STATE] in DEAD_STATES:
        return False
    try:
        return ticks is None or int(fields[_START_TIME]) == int(ticks)
    except (IndexError, ValueError):
        return False


def alive(pid: int, ticks: int | None = None) -> bool:
    """Whether ``pid`` is a live process (a zombie is not), and the one that started at clock
    tick ``ticks`` when given. One read of its stat; never signals anything."""
    return fields_alive(stat_fields(pid), ticks)


def stopped(pid: int) -> bool:
    """Whether the process is stopped (``kill -STOP``) or held by a tracer: it runs nothing."""
    return state(pid) in STOPPED_STATES


def stopped_line(name: str, pid: int) -> str:
    """The one line saying a stopped worker is why nothing answers, and the two ways out."""
    return f"worker {name} (pid {pid}) is stopped (SIGSTOP): `kill -CONT {pid}` or %job kill"


def pgid(pid: int) -> int | None:
    """The process's group id, or None."""
    fields = stat_fields(pid)
    try:
        return int(fields[_PGRP]) if fields else None
    except (IndexError, ValueError):
        return None


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22: tells a reused pid
    apart), or None."""
    fields = stat_fields(pid)
    try:
        return int(fields[_START_TIME]) if fields else None
    except (IndexError, ValueError):
        return None


def pids() -> Iterator[int]:
    """Every process id in ``/proc`` now."""
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                yield int(entry)


def group_alive(group: int) -> bool:
    """Whether process group ``group`` has a live (not zombie) member."""
    if not killpg(group, 0):
        return False
    for pid in pids():
        fields = stat_fields(pid)
        if fields and fields[_STATE] not in DEAD_STATES and fields[_PGRP] == str(group):
            return True
    return False


def group_members(groups: set[int]) -> dict[int, list[int]]:
    """The live (not zombie) members of these process groups, by group, in pid order."""
    found: dict[int, list[int]] = {}
    for pid in pids():
        fields = stat_fields(pid)
        if fields and fields[_STATE] not in DEAD_STATES:
            with contextlib.suppress(IndexError, ValueError):
                if int(fields[_PGRP]) in groups:
                    found.setdefault(int(fields[_PGRP]), []).append(pid)
    return {group: sorted(members) for group, members in found.items()}


PR_SET_CHILD_SUBREAPER = 36  # prctl(2)


def load_prctl() -> None:
    """Import ctypes in the parent, so that a forked child calling :func:`become_subreaper` does
    not (an import after a fork costs more than the fork)."""
    import ctypes  # noqa: F401  (stdlib; here: most importers never need it)


def become_subreaper() -> bool:
    """Make this process a child subreaper (prctl ``PR_SET_CHILD_SUBREAPER``): a descendant
    orphaned by its parent's exit is re-parented to it rather than to init, so ``setsid`` or an
    emptied environment cannot take it out of this process's subtree. Kept across ``execve``.
    False where there is no such call."""
    try:
        import ctypes

        return int(ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def owner(pid: int) -> int | None:
    """The uid owning ``/proc/<pid>`` (the process's effective uid), or None."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def parents(uid: int | None = None) -> dict[int, int]:
    """``{pid: parent pid}`` of every live (not zombie) process owned by ``uid`` (this user's:
    None), from one scan of ``/proc``."""
    uid = os.getuid() if uid is None else uid
    found: dict[int, int] = {}
    for pid in pids():
        fields = stat_fields(pid)
        if fields and fields[_STATE] not in DEAD_STATES and owner(pid) == uid:
            with contextlib.suppress(IndexError, ValueError):
                found[pid] = int(fields[1])
    return found


def in_sessions(sessions: set[int], uid: int, since: float) -> set[int]:
    """Live processes of ``uid`` in one of ``sessions`` (or process groups of those ids) that
    started at or after ``since`` (epoch seconds): a setsid'd process's children keep its session
    when it exits and they re-parent away; the start bound drops a reused id's strangers."""
    found: set[int] = set()
    for pid in pids():
        fields = stat_fields(pid)
        if not fields or fields[_STATE] in DEAD_STATES:
            continue
        with contextlib.suppress(IndexError, ValueError):
            if int(fields[_SESSION]) not in sessions and int(fields[_PGRP]) not in sessions:
                continue
            at = started_at(pid)
            if at is not None and at >= since and owner(pid) == uid:
                found.add(pid)
    return found


def descendants(roots: Iterable[int], table: dict[int, int]) -> set[int]:
    """The processes of ``table`` (:func:`parents`) below any of ``roots`` (not the roots)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


_BOOT: list[float] = []


def started_at(pid: int) -> float | None:
    """When the process started (epoch seconds, to the clock tick), or None."""
    ticks = start_ticks(pid)
    if ticks is None:
        return None
    if not _BOOT:
        raw = _read("/proc/stat") or b""
        for line in raw.splitlines():
            if line.startswith(b"btime "):
                _BOOT.append(float(line.split()[1]))
        if not _BOOT:
            return None
    return _BOOT[0] + ticks / os.sysconf("SC_CLK_TCK")


def boot_id() -> str | None:
    """This boot of this machine (``/proc/sys/kernel/random/boot_id``): a pid names the same
    process only where this is the same."""
    data = _read("/proc/sys/kernel/random/boot_id", 64)
    return data.decode("ascii", "replace").strip() if data else None


def _read(path: str, limit: int = 65536) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return None


def flock_holder(dev: int, ino: int) -> int | None:
    """The PID ``/proc/locks`` names as holding a ``flock`` on file (``dev``, ``ino``), or None."""
    device = f"{os.major(dev):02x}:{os.minor(dev):02x}:{ino}"
    data = _read("/proc/locks", 1 << 20) or b""
    for line in data.decode(errors="replace").splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == device and fields[4].isdigit():
            return int(fields[4])
    return None


def wchan(pid: int) -> str | None:
    """The kernel function the process sleeps in (``/proc/<pid>/wchan``; ``0``: running), or None."""
    raw = _read(f"/proc/{pid}/wchan", 256)
    if raw is None:
        return None
    return raw.decode(errors="replace").strip() or None


def cmdline(pid: int) -> list[str] | None:
    """The process's argument vector, or None (gone, a kernel thread or a zombie: empty)."""
    raw = _read(f"/proc/{pid}/cmdline")
    if not raw:
        return None
    return raw.rstrip(b"\0").decode(errors="replace").split("\0")


def exe(pid: int) -> str | None:
    """The path of the process's executable, or None (gone, or not ours)."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def env_value(pid: int, name: str) -> str | None:
    """The value of ``name`` in the environment ``pid`` started with, or None (absent, or not ours)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        return None
    needle = name.encode() + b"="
    at = environ.find(needle)
    while at > 0 and environ[at - 1] != 0:  # only at the start of an entry
        at = environ.find(needle, at + 1)
    if at < 0:
        return None
    end = environ.find(b"\0", at)
    return environ[at + len(needle) : end if end >= 0 else None].decode(errors="replace")


def pids_with_env(name: str, values: Iterable[str] | None = None) -> dict[str, list[int]]:
    """Live processes of this user (not this one, not zombies) whose environment carries
    ``name=value``, by value; only these ``values`` when given. Another user's process is never
    one (root reads every environment: a marker in a stranger's must not make it ours)."""
    wanted = None if values is None else set(values)
    found: dict[str, list[int]] = {}
    me, uid = os.getpid(), os.getuid()
    for pid in pids():
        if pid == me or owner(pid) != uid:
            continue
        value = env_value(pid, name)
        if value is None or (wanted is not None and value not in wanted) or not alive(pid):
            continue
        found.setdefault(value, []).append(pid)
    return found


def _send(signal_: Callable[[int, int], None], target: int, sig: int) -> bool:
    try:
        signal_(target, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def killpg(group: int, sig: int) -> bool:
    """Signal a process group; False when it is gone (or not ours)."""
    return _send(os.killpg, group, sig)


def kill(pid: int, sig: int) -> bool:
    """Signal a process; False when it is gone (or not ours)."""
    return _send(os.kill, pid, sig)


def open_pidfd(pid: int) -> int | None:
    """A pidfd of ``pid`` (readable once it exited), or None where there is none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def wait_exit(
    pid: int,
    limit: float,
    exited: Callable[[], bool],
    every: float | None = None,
    tick: Callable[[], bool] | None = None,
) -> None:
    """Block until ``pid`` exits or ``limit`` seconds pass: woken by a pidfd, else by polling
    ``exited()``. ``tick()`` is called every ``every`` seconds meanwhile, until it returns True."""
    pidfd = open_pidfd(pid)
    poller = None
    if pidfd is not None:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
    try:
        now = time.monotonic()
        deadline = now + limit
        delay = 0.0001
        while now < deadline:
            step = deadline - now if tick is None or every is None else min(every, deadline - now)
            if poller is not None:
                if poller.poll(step * 1000):
                    return
            else:
                if exited():
                    return
                time.sleep(min(delay, step))
                delay = min(delay * 2, 0.0005)
            if tick is not None and tick():
                tick = None
            now = time.monotonic()
    finally:
        if pidfd is not None:
            os.close(pidfd)


async def wait_exit_async(pid: int, running: Callable[[], bool], poll: float = POLL) -> None:
    """Until ``pid`` exits: woken by a pidfd (opened, then ``running()`` checked, so a pid reused
    meanwhile is not waited on); without one, until ``running()`` is False."""
    if not running():
        return
    pidfd = open_pidfd(pid)
    if pidfd is not None:
        try:
            if running():
                loop = asyncio.get_running_loop()
                done: asyncio.Future[None] = loop.create_future()

                def exited() -> None:
                    if not done.done():
                        done.set_result(None)

                loop.add_reader(pidfd, exited)
                try:
                    await done
                finally:
                    loop.remove_reader(pidfd)
                return
        finally:
            os.close(pidfd)
    while running():
        await asyncio.sleep(poll)


def wait_until(done: Callable[[], bool], limit: float, poll: float = POLL) -> bool:
    """Block until ``done()`` or ``limit`` seconds pass; whether it is done."""
    deadline = time.monotonic() + limit
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)
    return True


async def wait_until_async(done: Callable[[], bool], limit: float, poll: float = POLL) -> bool:
    """:func:`wait_until` on the running loop."""
    deadline = time.monotonic() + limit
    while not done():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(poll)
    return True


def escalate(
    send: Callable[[int], object],
    alive: Callable[[], bool],
    grace: float = GRACE,
    signals: tuple[int, ...] = ESCALATION,
    poll: float = POLL,
) -> None:
    """The one escalation: ``send(sig)`` for each of ``signals`` in turn (SIGINT, SIGTERM,
    SIGKILL: as Ctrl-C first), waiting up to ``grace`` seconds after each but the last for
    ``alive()`` to turn False; stops as soon as it does."""
    for i, sig in enumerate(signals):
        send(sig)
        if i == len(signals) - 1 or wait_until(lambda: not alive(), grace, poll):
            return


async def escalate_async(
    send: Callable[[int], object],
    alive: Callable[[], bool],
    grace: float = GRACE,
    signals: tuple[int, ...] = ESCALATION,
    poll: float = POLL,
) -> None:
    """:func:`escalate` on the running loop."""
    for i, sig in enumerate(signals):
        send(sig)
        if i == len(signals) - 1 or await wait_until_async(lambda: not alive(), grace, poll):
            return


async def stop_group(group: int, grace: float = GRACE) -> None:
    """SIGINT → SIGTERM → SIGKILL to process group ``group`` until no member is alive."""
    await escalate_async(lambda sig: killpg(group, sig), lambda: group_alive(group), grace)


# ── listening TCP sockets (/proc/<pid>/net/tcp{,6} and the socket inodes of /proc/<pid>/fd) ──
_LISTEN = "0A"  # TCP_LISTEN in the ``st`` column


def _address(hex_addr: str) -> str:
    """``0100007F`` → ``127.0.0.1``; a 32-digit IPv6 address (four little-endian words) → its text."""
    import ipaddress

    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def parse_net_tcp(text: str) -> dict[int, tuple[str, int]]:
    """Socket inode → (address, port) of each LISTEN line of a ``/proc/net/tcp`` or ``tcp6`` table."""
    found: dict[int, tuple[str, int]] = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _LISTEN:
            continue
        hex_addr, _, hex_port = fields[1].partition(":")
        try:
            found[int(fields[9])] = (_address(hex_addr), int(hex_port, 16))
        except ValueError:
            continue
    return found


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets ``pid`` holds open (``socket:[N]`` links in /proc/<pid>/fd)."""
    inodes: set[int] = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:[") and target.endswith("]"):
            inodes.add(int(target[8:-1]))
    return inodes


def listening_tcp(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket ``pid`` listens on, IPv4 and IPv6."""
    table: dict[int, tuple[str, int]] = {}
    for name in ("tcp", "tcp6"):
        data = _read(f"/proc/{pid}/net/{name}", limit=1 << 22)
        if data is not None:
            table.update(parse_net_tcp(data.decode("ascii", "replace")))
    return sorted(table[inode] for inode in socket_inodes(pid) if inode in table)


def parse_listen_owners(text: str, port: int) -> set[int]:
    """UIDs owning a LISTEN socket on ``port`` (any address) in a ``/proc/net/tcp`` or ``tcp6`` table."""
    owners: set[int] = set()
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _LISTEN:
            continue
        try:
            if int(fields[1].rpartition(":")[2], 16) == port:
                owners.add(int(fields[7]))
        except ValueError:
            continue
    return owners


def listen_owners(port: int, limit: int = 1 << 24) -> set[int] | None:
    """UIDs owning a TCP socket that listens on ``port`` on this machine (IPv4 and IPv6);
    None when a table could not be read whole (more than ``limit`` bytes, or unreadable)."""
    owners: set[int] = set()
    for name in ("tcp", "tcp6"):
        data = _read(f"/proc/net/{name}", limit=limit + 1)
        if data is None or len(data) > limit:
            return None
        owners |= parse_listen_owners(data.decode("ascii", "replace"), port)
    return owners


# ── who is at the other end of a loopback TCP connection (the uid of the client's socket) ──
def _endpoint(text: str) -> tuple[str, int] | None:
    """``0100007F:1F90`` → ``("127.0.0.1", 8080)``; an IPv4-mapped IPv6 address as IPv4."""
    import ipaddress

    hex_addr, _, hex_port = text.partition(":")
    try:
        address = ipaddress.ip_address(_address(hex_addr))
        port = int(hex_port, 16)
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address), port


def parse_peer_uid(text: str, client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid of the socket connected from ``client`` to ``server`` in a ``/proc/net/tcp`` or
    ``tcp6`` table (addresses as text, IPv4-mapped ones as IPv4), else None. Lines are matched on
    their ports first (as the table spells them): a busy machine lists thousands of sockets."""
    ports = (f":{client[1]:04X}", f":{server[1]:04X}")
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or not (fields[1].endswith(ports[0]) and fields[2].endswith(ports[1])):
            continue
        if _endpoint(fields[1]) == client and _endpoint(fields[2]) == server:
            try:
                return int(fields[7])
            except ValueError:
                return None
    return None


def diag_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid of the TCP socket ``client`` → ``server`` asked of the kernel by its 4-tuple
    (netlink sock_diag, as ``ss`` does): ~0.1 ms where reading /proc/net/tcp costs 10–40 ms on a
    machine with a thousand sockets. None when the kernel does not answer it."""
    import ipaddress
    import socket
    import struct

    ip = ipaddress.ip_address(client[0])
    family = socket.AF_INET if ip.version == 4 else socket.AF_INET6

    def packed(address: str) -> bytes:
        return ipaddress.ip_address(address).packed.ljust(16, b"\0")

    sockid = (
        struct.pack("!HH", client[1], server[1])
        + packed(client[0])
        + packed(server[0])
        + struct.pack("=III", 0, 0xFFFFFFFF, 0xFFFFFFFF)  # any interface; INET_DIAG_NOCOOKIE
    )
    request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
    header = struct.pack("=IHHII", 16 + len(request), 20, 1, 1, 0)  # SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 4) as diag:  # NETLINK_INET_DIAG
            diag.settimeout(1.0)
            diag.send(header + request)
            answer = diag.recv(8192)
    except OSError:
        return None
    if len(answer) < 16 + 72 or struct.unpack_from("=H", answer, 4)[0] != 20:
        return None  # NLMSG_ERROR (no such socket) or short
    uid: int = struct.unpack_from("=I", answer, 16 + 64)[0]
    return uid


def peer_uid(sock: Any, limit: int = 1 << 24) -> int | None:
    """The uid that opened the other end of ``sock``, an accepted loopback TCP connection: the
    kernel records each socket's owner (the client's socket is on this machine too). Asked by
    netlink, else looked up in /proc/net/tcp{,6}. None when it cannot be told (not TCP, gone)."""
    import ipaddress

    def plain(address: Any) -> tuple[str, int]:
        ip = ipaddress.ip_address(address[0])
        return str(getattr(ip, "ipv4_mapped", None) or ip), int(address[1])

    try:
        client, server = plain(sock.getpeername()), plain(sock.getsockname())
    except (OSError, ValueError, TypeError, IndexError):
        return None
    uid = diag_uid(client, server)
    if uid is not None:
        return uid
    for name in ("tcp", "tcp6"):
        data = _read(f"/proc/net/{name}", limit=limit + 1)
        if data is None or len(data) > limit:
            continue
        uid = parse_peer_uid(data.decode("ascii", "replace"), client, server)
        if uid is not None:
            return uid
    return None


def holding_open(path: str, uid: int) -> list[int]:
    """PIDs of ``uid``'s processes holding ``path`` open (an fd linking to it, the same file).
    A lock passed down to a child is held by the child, whatever /proc/locks names."""
    try:
        info = os.stat(path)
    except OSError:
        return []
    found = []
    for pid in pids():
        if owner(pid) != uid:
            continue
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for name in names:
            link = f"/proc/{pid}/fd/{name}"
            try:
                if os.readlink(link) != path:
                    continue
                held = os.stat(link)
            except OSError:
                continue
            if (held.st_dev, held.st_ino) == (info.st_dev, info.st_ino):
                found.append(pid)
                break
    return found


# ── why a process ended ───────────────────────────────────────────────
_EXIT_CODE = 49  # field 52, exit_code: a zombie's wait status (Linux 3.5+), index 49 after comm
KMSG = "/dev/kmsg"
KMSG_MAX = 4 << 20  # bytes of the kernel log read at most for one look


def wait_status_text(status: int) -> str:
    """``killed by SIGKILL`` / ``exited with code 3`` for a ``waitpid`` status."""
    if os.WIFSIGNALED(status):
        try:
            name = signal.Signals(os.WTERMSIG(status)).name
        except ValueError:
            name = f"signal {os.WTERMSIG(status)}"
        return f"killed by {name}"
    if os.WIFEXITED(status):
        return f"exited with code {os.WEXITSTATUS(status)}"
    return f"wait status {status}"


def returncode_text(returncode: int) -> str:
    """The same for ``subprocess``'s return code (negative: the signal that killed it)."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def death_cause(pid: int, returncode: int | None = None) -> str:
    """Why ``pid`` ended, as far as this machine tells: ``returncode`` when its reaper kept it
    (``subprocess``'s, negative for a signal), else its wait status while it is a zombie
    (``killed by SIGKILL``); and the OOM killer when the kernel log names it; '' if unknown."""
    said = []
    if returncode is not None:
        said.append(returncode_text(returncode))
    else:
        fields = stat_fields(pid)
        if fields and fields[_STATE] == "Z" and len(fields) > _EXIT_CODE:
            with contextlib.suppress(ValueError):
                said.append(wait_status_text(int(fields[_EXIT_CODE])))
    if oom_killed(pid):
        said.append("by the OOM killer (kernel log)")
    return ", ".join(said)


def oom_killed(pid: int, path: str = KMSG) -> bool:
    """Whether the kernel log says the OOM killer killed ``pid``. Read without blocking (one
    record a read, at most ``KMSG_MAX`` bytes); False where the log cannot be read (not root)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    needles = (
        f"Killed process {pid} ".encode(),
        f",pid={pid},".encode(),
    )  # oom_kill_process, the oom-kill: line
    seen = 0
    try:
        while seen < KMSG_MAX:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:  # the end of the log
                return False
            except OSError:  # EPIPE: records overwritten meanwhile; read on
                continue
            if not record:
                return False
            seen += len(record)
            if any(needle in record for needle in needles):
                return True
        return False
    finally:
        os.close(fd)
