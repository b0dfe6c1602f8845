"""The tornado handler that serves a context's Monarch dashboard through the Jupyter server.

Authenticated like every route of the server (token or login cookie; POSTs need Jupyter's
XSRF token, which the injected shim sends). The target is only ever the loopback URL the
context's ``status.json`` records (:mod:`.dashboard`); the request's cookies and token are not
passed on; bodies are bounded and every upstream call has a connect and a total timeout.
"""

from __future__ import annotations

import json
import os
import re
import stat
import urllib.parse

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import httpclient, web
from tornado.ioloop import IOLoop
from tornado.simple_httpclient import HTTPTimeoutError, SimpleAsyncHTTPClient

from ..jobs.local_records import sidecar_lock
from ..system import procfs as _procfs
from ..system.files import UnsafeFileError
from . import dashboard as dash
from .config import MonarchJupyter
from .contexts import InvalidPath, resolve_folder, trusted_status
from .handlers import _SCANNER

_client: SimpleAsyncHTTPClient | None = None


def _http() -> SimpleAsyncHTTPClient:
    """One bounded client for the server (its own instance: our limits, not the shared one's)."""
    global _client
    if _client is None:
        _client = SimpleAsyncHTTPClient(
            force_instance=True,
            max_clients=8,
            max_body_size=dash.MAX_RESPONSE_BYTES,
            max_buffer_size=dash.MAX_RESPONSE_BYTES,
        )
    return _client


#: What an apply id looks like (it names a file in /tmp: no separators, no dots first).
APPLY_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")


def sidecar_ports(apply_id: object) -> set[int] | None:
    """The TCP ports the sidecar of job ``apply_id`` listens on: those of our processes that hold
    Monarch's sidecar lock of that job open; None when none does."""
    if not isinstance(apply_id, str) or not APPLY_ID.fullmatch(apply_id):
        return None
    lock = sidecar_lock(apply_id)
    try:
        info = os.lstat(lock)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        return None
    holders = _procfs.holding_open(lock, os.getuid())
    if not holders:
        return None
    return {port for pid in holders for _, port in _procfs.listening_tcp(pid)}


def target_of(root_dir: str, context_dir: str) -> str:
    """The dashboard base URL of the context folder ``context_dir`` (relative to the root), when
    its status.json is this user's alone and its port is one the job's own sidecar listens on.
    Reads one status.json (bounded, non-blocking), /proc/locks and /proc/net/tcp{,6}; runs in
    the scan thread."""
    name = dash.context_name(context_dir)
    try:
        folder, _ = resolve_folder(root_dir, context_dir)
    except InvalidPath:
        raise dash.Refusal(404, f"no context folder {context_dir!r} under the server root") from None
    if os.path.basename(os.path.dirname(folder)) != dash.MONARCH_DIR:
        raise dash.Refusal(404, f"{context_dir!r} is not a context folder (.monarch/<context>)")
    try:
        status = trusted_status(folder)
    except UnsafeFileError as error:
        raise dash.Refusal(403, f"{error}: not proxied") from None
    base = dash.target(status, name)
    port = urllib.parse.urlsplit(base).port or 0
    dash.check_owner(_procfs.listen_owners(port), os.getuid(), base)
    dash.check_sidecar(sidecar_ports(status.get("apply_id") if status else None), port, base)
    return base


def _broken(where: str, error: BaseException | None, answered: list[str]) -> dash.Refusal:
    """The one line for a dashboard that failed: never reached, or broke off its answer."""
    if not answered:
        return dash.Refusal(
            502,
            f"the dashboard at {where} is not answering ({error}): is the job still running? "
            "%job shows it; %job apply starts it again",
        )
    limit = dash.MAX_RESPONSE_BYTES >> 20
    return dash.Refusal(
        502, f"the dashboard at {where} broke off its answer ({error}; answers over {limit} MB are cut)"
    )


class DashboardProxyHandler(JupyterHandler):
    """GET/POST ``/monarch-jupyter/dashboard/<context dir>/<path>``: the context's dashboard."""

    # The dashboard shows the job's actors and takes py-spy stacks of its processes.
    auth_resource = "kernels"

    def initialize(self, root_dir: str, settings: MonarchJupyter | None = None) -> None:
        self.root_dir = root_dir
        self.timeout = (settings or MonarchJupyter()).dashboard_timeout

    @web.authenticated
    @authorized
    async def get(self, path: str) -> None:
        await self._proxy(path)

    @web.authenticated
    @authorized
    async def post(self, path: str) -> None:
        await self._proxy(path)

    def _prefix(self, context_dir: str) -> str:
        quoted = urllib.parse.quote(context_dir, safe="/")
        return url_path_join(self.base_url, "monarch-jupyter", dash.ROUTE, quoted)

    async def _proxy(self, path: str) -> None:
        try:
            route = dash.split_path(path)
            base = await IOLoop.current().run_in_executor(
                _SCANNER, target_of, self.root_dir, route.context_dir
            )
            prefix = self._prefix(route.context_dir)
            if not route.rest:  # relative asset paths need the trailing slash
                query = f"?{self.request.query}" if self.request.query else ""
                self.redirect(f"{prefix}/{query}")
                return
            if len(self.request.body or b"") > dash.MAX_REQUEST_BYTES:
                raise dash.Refusal(413, f"request body over {dash.MAX_REQUEST_BYTES} bytes: not forwarded")
            response = await self._fetch(dash.upstream_url(base, route.rest, self.request.query))
        except dash.Refusal as refusal:
            self._refuse(refusal)
            return
        self._relay(response, base, prefix)

    async def _fetch(self, url: str) -> httpclient.HTTPResponse:
        method = self.request.method or "GET"
        headers = {k: v for k in dash.REQUEST_HEADERS if (v := self.request.headers.get(k)) is not None}
        answered: list[str] = []  # the status and header lines, once the dashboard began to answer
        request = httpclient.HTTPRequest(
            url,
            method=method,
            headers=headers,
            body=self.request.body if method == "POST" else None,
            follow_redirects=False,
            connect_timeout=dash.CONNECT_TIMEOUT,
            request_timeout=self.timeout,
            decompress_response=True,
            header_callback=answered.append,
        )
        where = urllib.parse.urlsplit(url).netloc
        try:
            # raise_error=False keeps the dashboard's own 4xx/5xx; connection errors still raise
            response = await _http().fetch(request, raise_error=False)
        except HTTPTimeoutError:
            raise dash.Refusal(504, f"the dashboard at {where} did not answer in time") from None
        except (OSError, httpclient.HTTPError) as exc:
            raise _broken(where, exc, answered) from None
        if response.code == 599:  # a transport error reported as a response
            raise _broken(where, response.error, answered)
        return response

    def _relay(self, response: httpclient.HTTPResponse, base: str, prefix: str) -> None:
        self.set_status(response.code, response.reason)
        for name in dash.RESPONSE_HEADERS:
            value = response.headers.get(name)
            if value is not None:
                self.set_header(name, value)
        location = response.headers.get("Location")
        if location:
            self.set_header("Location", dash.rewrite_location(location, base, prefix))
        if response.code in (204, 304):
            self.finish()
            return
        body = response.body or b""
        if response.headers.get("Content-Type", "").startswith("text/html"):
            body = dash.rewrite_html(body, prefix)
        self.finish(body)

    def _refuse(self, refusal: dash.Refusal) -> None:
        """One line: an HTML page for a browser's page load, JSON for the dashboard's own calls."""
        self.clear()
        self.set_status(refusal.code)
        self.log.info("monarch_jupyter dashboard: %s", refusal.message)
        if "text/html" in self.request.headers.get("Accept", ""):
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.finish(dash.error_page(refusal.message))
        else:
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"error": refusal.message}))
