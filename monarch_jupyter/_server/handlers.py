"""Tornado handlers of the monarch_jupyter server extension."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web
from tornado.ioloop import IOLoop

from .contexts import InvalidPath, contexts_json

#: Scans touch the file system (a slow or hung mount, thousands of folders):
#: they run here, never on the server's event loop, so no file can stall
#: the other endpoints. Two threads: polls from many tabs queue, they don't pile up.
_SCANNER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="monarch-jupyter-scan")


class ContextsHandler(APIHandler):
    """GET the Monarch contexts under the server root (``?path=`` narrows it)."""

    # Listing reads files under the root, so it needs the same permission as reading contents.
    auth_resource = "contents"

    def initialize(self, root_dir: str) -> None:
        self.root_dir = root_dir

    @web.authenticated
    @authorized
    async def get(self) -> None:
        path = self.get_argument("path", "")
        try:
            # scanned and serialised in the thread: the loop only writes the (bounded) text
            body = await IOLoop.current().run_in_executor(_SCANNER, contexts_json, self.root_dir, path)
        except InvalidPath as exc:
            raise web.HTTPError(400, f"invalid path: {exc}") from None
        self.set_header("Content-Type", "application/json")
        self.finish(body)
