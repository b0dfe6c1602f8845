"""Tornado handlers of the monarch_jupyter server extension."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from tornado import web
from tornado.ioloop import IOLoop

from .config import MonarchJupyter
from .contexts import InvalidPath, contexts_json

#: The run grid's front end, loaded by the stub each grid's widget state carries.
WIDGET_FILES = {
    "run.js": "text/javascript",
    "run.css": "text/css",
}
_WIDGETS = Path(__file__).resolve().parent.parent / "widgets"

#: Scans touch the file system (a slow or hung mount, thousands of folders):
#: they run here, never on the server's event loop, so no file can stall
#: the other endpoints. Two threads: polls from many tabs queue, they don't pile up.
_SCANNER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="monarch-jupyter-scan")


class OneLineErrors(APIHandler):
    """An API handler whose error answer is ``{"message": the one line}`` as written: tornado
    doubles each ``%`` of a message raised without arguments (``%%job apply``), APIHandler
    passes it on doubled; ``log_message % args`` undoes it, as tornado's own page does."""

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = (kwargs.get("exc_info") or (None, None, None))[1]
        if not isinstance(error, web.HTTPError) or not error.log_message:
            super().write_error(status_code, **kwargs)
            return
        try:
            message = error.log_message % error.args
        except (TypeError, ValueError):
            message = error.log_message
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message, "reason": error.reason}))


class ContextsHandler(OneLineErrors):
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
            # scanned and serialised in the thread: the loop only writes the (bounded) text
            limits = self.settings_.limits()
            extra = {"poll_seconds": self.settings_.poll_interval}  # the sidebar's refresh interval
            body = await IOLoop.current().run_in_executor(
                _SCANNER, contexts_json, self.root_dir, path, limits, extra
            )
        except InvalidPath as exc:
            raise web.HTTPError(400, f"invalid path: {exc}") from None
        self.set_header("Content-Type", "application/json")
        self.finish(body)


class WidgetCodeHandler(JupyterHandler):
    """GET the run grid's run.js / run.css (public code of this package, cacheable)."""

    auth_resource = "contents"

    @web.authenticated
    @authorized
    def get(self, name: str) -> None:
        if name not in WIDGET_FILES:
            raise web.HTTPError(404)
        self.set_header("Content-Type", WIDGET_FILES[name])
        # the stub asks for ?v=<version>: a new version is a new URL
        self.set_header("Cache-Control", "max-age=86400" if self.get_argument("v", "") else "no-cache")
        try:
            code = (_WIDGETS / name).read_bytes()
        except FileNotFoundError:
            raise web.HTTPError(404, f"{name} is not built: run `jlpm build` in labextension/") from None
        self.finish(code)
