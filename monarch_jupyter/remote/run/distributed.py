"""``%%remote --torch``'s MASTER_ADDR / MASTER_PORT, asked of the run's first rank (the rank
variables themselves are computed on each host: :func:`.protocol.torch_env`)."""

from __future__ import annotations

from typing import Any

from ..errors import RemoteError


def master_env(loop: Any, actors: Any, timeout: float) -> dict[str, str]:
    """The first rank's host name and a port free on it (``RemoteActor.master``), as
    Monarch's SPMDActor picks them; ``loop`` is the session's owned loop, ``actors`` the
    first target's actor mesh."""
    first = actors.slice(**dict.fromkeys(actors.sizes, 0))

    async def ask() -> tuple[str, int]:
        host, port = await first.master.call_one()
        return str(host), int(port)

    try:
        host, port = loop.run(ask(), timeout=timeout)
    except Exception as error:
        raise RemoteError(f"--torch: the first rank gave no master address: {error}") from None
    return {"MASTER_ADDR": host, "MASTER_PORT": str(port)}
