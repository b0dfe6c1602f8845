"""Tornado handlers of the monarch_jupyter server extension."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web
from tornado.ioloop import IOLoop

from .config import MonarchJupyter
from .contexts import InvalidPath, list_contexts

#: Scans touch the file system (a slow or hung mount, thousands of folders):
#: they run here, never on the server's event loop, so no file can stall
#: the other endpoints. Two threads: polls from many tabs queue, they don't pile up.
_SCANNER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="monarch-jupyter-scan")


class ContextsHandler(APIHandler):
    """GET the Monarch contexts under the server root (``?path=`` narrows it)."""

    # Listing reads files under the root, so it needs the same permission as reading contents.
    auth_resource = "contents"

    def initialize(self, root_dir: str, settings: MonarchJupyter | None = None) -> None:
        self.root_dir = root_dir
        self.settings_ = settings or MonarchJupyter()

    @web.authenticated
    @authorized
    async def get(self) -> None:
        path = self.get_argument("path", "")
        try:
            limits = self.settings_.limits()
            body = await IOLoop.current().run_in_executor(
                _SCANNER, list_contexts, self.root_dir, path, limits
            )
        except InvalidPath as exc:
            raise web.HTTPError(400, f"invalid path: {exc}") from None
        body["poll_seconds"] = self.settings_.poll_interval  # the sidebar's refresh interval
        self.finish(json.dumps(body))
