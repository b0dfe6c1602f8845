"""Tornado handlers of the monarch_jupyter server extension."""

from __future__ import annotations

import json

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from .contexts import InvalidPath, list_contexts


class ContextsHandler(APIHandler):
    """GET the Monarch contexts under the server root (``?path=`` narrows it)."""

    # Listing reads files under the root, so it needs the same permission as reading contents.
    auth_resource = "contents"

    def initialize(self, root_dir: str) -> None:
        self.root_dir = root_dir

    @web.authenticated
    @authorized
    def get(self) -> None:
        try:
            body = list_contexts(self.root_dir, self.get_argument("path", ""))
        except InvalidPath as exc:
            raise web.HTTPError(400, f"invalid path: {exc}") from None
        self.finish(json.dumps(body))
