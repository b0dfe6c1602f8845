"""Jupyter server extension: a read-only API over the Monarch contexts on disk.

Enabled by ``jupyter-config/jupyter_server_config.d/monarch_jupyter.json``
(installed into ``etc/jupyter``); serves ``/monarch-jupyter/contexts`` for the
JupyterLab sidebar. It only reads ``status.json`` files and symlink targets;
it never opens a pickle. ``/monarch-jupyter/dashboard/<context dir>/`` serves that context's
Monarch dashboard from the loopback URL its status.json records (``dashboard_proxy.py``).
it never opens a pickle. ``/monarch-jupyter/shell`` opens a terminal
running a shell on a rank (``shell.py``); the command in that terminal reads the cache.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.utils import url_path_join

from .config import MonarchJupyter
from .dashboard_proxy import DashboardProxyHandler
from .handlers import ContextsHandler, WidgetCodeHandler
from .shell import ShellHandler

API_NAMESPACE = "monarch-jupyter"


def __getattr__(name: str) -> Any:
    # `jupyter server extension list` shows an extension's __version__: the package's one version
    if name == "__version__":
        from importlib.metadata import version

        return version("monarch_jupyter")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "monarch_jupyter._server"}]


def dashboard_route(base_url: str) -> str:
    """``<base>/monarch-jupyter/dashboard/<context dir>/<path>``: a context's Monarch dashboard."""
    return url_path_join(base_url, API_NAMESPACE, "dashboard", "(.*)")


def _load_jupyter_server_extension(server_app: Any) -> None:
    """Register the handlers under the server's base URL."""
    web_app = server_app.web_app
    base_url = web_app.settings["base_url"]
    route = url_path_join(base_url, API_NAMESPACE, "contexts")
    settings = MonarchJupyter(parent=server_app)  # c.MonarchJupyter.* (config.py)
    static = url_path_join(base_url, API_NAMESPACE, "static", r"([a-z]+\.(?:js|css))")
    web_app.add_handlers(
        ".*$",
        [
            (route, ContextsHandler, {"root_dir": server_app.root_dir, "settings": settings}),
            (static, WidgetCodeHandler),
            (
                dashboard_route(base_url),
                DashboardProxyHandler,
                {"root_dir": server_app.root_dir, "settings": settings},
            ),
            (
                url_path_join(base_url, API_NAMESPACE, "shell"),
                ShellHandler,
                {"root_dir": server_app.root_dir},
            ),
        ],
    )
    server_app.log.info("monarch_jupyter: serving %s", route)
