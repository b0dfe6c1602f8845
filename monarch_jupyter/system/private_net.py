"""A kernel whose local Monarch workers only it can reach: a network namespace of its own.

Monarch 0.7's local workers (``ProcessJob``) listen on abstract Unix sockets and accept any peer
(``trust_all_connections``): any user of the machine can attach and run code as you. Abstract
sockets belong to a network namespace, so a kernel started in a namespace of its own, with the
workers it spawns (they inherit it), is out of every other process's reach. The kernel talks to
Jupyter over ``ipc`` (socket files in Jupyter's 0700 runtime folder), which a network namespace
does not cut: :mod:`.private_provisioner` switches the kernel's transport to ``ipc``.
What the kernel loses: every network but its own loopback (SSH and Slurm jobs, the dashboard
through the Jupyter server, pip).

    python -m monarch_jupyter.private_net install [--user | --sys-prefix | --prefix DIR]  # the spec
    python -m monarch_jupyter.private_net -f CONNECTION_FILE                # what Jupyter runs
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import socket
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

KERNEL_NAME = "monarch-private"
PROVISIONER = "monarch-private-net"  # .private_provisioner's entry point (jupyter_client.kernel_provisioners)
ENV = "MONARCH_JUPYTER_PRIVATE_NET"  # in the kernel and its workers: the namespace's inode

_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def enter() -> None:
    """Move this process, while it is single-threaded, into a new network namespace with its
    loopback up: directly as root, else inside a new user namespace that maps our uid and gid to
    themselves (nothing gained but the right to make the network namespace). Raises OSError."""
    uid, gid = os.getuid(), os.getgid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNET if uid == 0 else _CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot make a private network namespace: {os.strerror(err)}")
    if uid != 0:
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # the loopback starts down
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))
    os.environ[ENV] = str(_net_inode())


def _net_inode() -> int:
    return os.stat("/proc/self/ns/net").st_ino


def in_private_net() -> bool:
    """Whether this process runs in the namespace :func:`enter` made (not just with its variable)."""
    value = os.environ.get(ENV)
    try:
        return bool(value) and value == str(_net_inode())
    except OSError:
        return False


def kernel_spec() -> dict[str, Any]:
    return {
        "argv": [sys.executable, "-m", "monarch_jupyter.private_net", "-f", "{connection_file}"],
        "display_name": "Python 3 (Monarch, private network)",
        "language": "python",
        "metadata": {"kernel_provisioner": {"provisioner_name": PROVISIONER}},
    }


def install(user: bool = False, prefix: str | None = None) -> str:
    """Install the kernel spec (for this user, or under ``prefix``); returns where."""
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "kernel.json").write_text(json.dumps(kernel_spec(), indent=1))
        where: str = KernelSpecManager().install_kernel_spec(folder, KERNEL_NAME, user=user, prefix=prefix)
    return where


def install_args(argv: list[str]) -> tuple[bool, str | None]:
    """``(user, prefix)`` of ``install``'s arguments (at most one of ``--user``, ``--sys-prefix``,
    ``--prefix DIR``, as ``jupyter kernelspec install`` takes them); ValueError (one line)."""
    user, prefix, rest = False, None, list(argv)
    chosen = []
    while rest:
        word = rest.pop(0)
        if word == "--user":
            user = True
        elif word == "--sys-prefix":
            prefix = sys.prefix
        elif word == "--prefix" or word.startswith("--prefix="):
            value = word.partition("=")[2] if "=" in word else (rest.pop(0) if rest else "")
            if not value:
                raise ValueError("--prefix wants a folder, e.g. --prefix ~/.local")
            prefix = os.path.abspath(os.path.expanduser(value))
            word = "--prefix"
        else:
            raise ValueError(f"install takes --user, --sys-prefix or --prefix DIR, not {word!r}")
        chosen.append(word)
    if len(chosen) > 1:
        raise ValueError(
            f"install takes one of --user, --sys-prefix, --prefix DIR, not {' and '.join(chosen)}"
        )
    return user, prefix


def main(argv: list[str]) -> int:
    if argv[:1] == ["install"]:
        try:
            user, prefix = install_args(argv[1:])
        except ValueError as error:
            print(f"monarch_jupyter.private_net: {error}", file=sys.stderr)
            return 2
        print(f"installed kernel {KERNEL_NAME!r} in {install(user=user, prefix=prefix)}")
        return 0
    try:
        enter()
    except OSError as error:
        print(
            f"monarch_jupyter: {error.strerror}; this machine does not allow it (user namespaces "
            "off?): use the ordinary Python kernel",
            file=sys.stderr,
        )
        return 1
    from ipykernel.kernelapp import launch_new_instance

    launch_new_instance(argv=argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
