"""The Jupyter kernel provisioner of :mod:`.private_net`'s kernel (its own module: importing
jupyter_client's provisioning stays off the kernel's path)."""

from __future__ import annotations

import os
from typing import Any

from jupyter_client.provisioning import LocalProvisioner


class PrivateNetProvisioner(LocalProvisioner):
    """The local provisioner, with the kernel's channels on ``ipc`` socket files next to its
    connection file (Jupyter's private runtime folder): TCP loopback is not shared across
    network namespaces."""

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        km = self.parent
        if km is not None and km.transport != "ipc":
            if not km.connection_file:
                from jupyter_core.paths import jupyter_runtime_dir

                runtime = jupyter_runtime_dir()
                os.makedirs(runtime, mode=0o700, exist_ok=True)  # as jupyter_client makes it
                km.connection_file = os.path.join(runtime, f"kernel-{km.kernel_id}.json")
            km.transport = "ipc"
            km.ip = os.path.splitext(km.connection_file)[0] + "-ipc"
            self.ports_cached = True  # no TCP ports to find: free ipc names are picked when written
        result: dict[str, Any] = await super().pre_launch(**kwargs)
        return result
