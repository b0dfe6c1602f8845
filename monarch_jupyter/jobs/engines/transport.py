"""Whether this machine can be reached by its workers, and the one fix Monarch offers.

Where this machine's hostname resolves only to loopback, Monarch's tcp transport
panics while creating the client (a ``PanicException``, a BaseException); a client
whose workers are all on this machine can listen on 127.0.0.1 instead.
"""

from __future__ import annotations

import ipaddress
import socket

LOOPBACK_FIX = 'monarch.config.configure(default_transport="tcp://127.0.0.1:0")'


def _is_loopback_address(address: str) -> bool:
    return ipaddress.ip_address(address.split("%")[0]).is_loopback


def loopback_only(name: str) -> bool:
    """Whether ``name`` resolves only to loopback or link-local addresses (or not at all)."""
    try:
        infos = socket.getaddrinfo(name, None)
    except OSError:
        return True
    addresses = {str(info[4][0]) for info in infos}
    return all(
        _is_loopback_address(a) or ipaddress.ip_address(a.split("%")[0]).is_link_local for a in addresses
    )


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` is this machine's loopback (an address, or a name resolving only there)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False  # unknown here; it may be an alias in the user's ssh config
    return bool(addresses) and all(_is_loopback_address(a) for a in addresses)


def hostname_is_loopback_only() -> bool:
    return loopback_only(socket.gethostname())


def listen_on_loopback() -> None:
    """Make this process's Monarch client listen on 127.0.0.1 (workers on this machine only)."""
    import monarch.config

    monarch.config.configure(default_transport="tcp://127.0.0.1:0")
