"""The Monarch dashboard behind the Jupyter server: which upstream a proxied path means (pure).

``/monarch-jupyter/dashboard/<context dir>/<path>`` (the context dir relative to the server
root, e.g. ``nb/.monarch/default``) is forwarded to the dashboard of that context's job, found
in the context's ``status.json`` (written by our kernel from the URLs of the job sidecar we
started): ``urls.dashboard`` if the job has one, else ``urls.telemetry``, which serves the same
Flask app (Monarch's ``start_telemetry_servers`` always starts it, frontend and ``/api``).
Only a loopback ``http`` URL is ever a target: the proxy never takes a host or port from the
request, so it is no open proxy.

Monarch's frontend asks for absolute paths (``/static/…``, ``/api/…``); :func:`rewrite_html`
prefixes the page's own ``src``/``href`` and injects a small script that prefixes the paths
its ``fetch`` / ``XMLHttpRequest`` calls ask for (and adds Jupyter's XSRF header to them).
"""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any, NamedTuple

ROUTE = "dashboard"
MONARCH_DIR = ".monarch"
#: ``<dir>/.monarch/<context>`` then the dashboard's own path (the first ``.monarch`` segment wins).
PATH_RE = re.compile(r"^(?P<dir>(?:[^/]+/)*?\.monarch/[^/.][^/]*)(?P<rest>/.*)?$")
#: Hosts a recorded URL may name, and the address each is dialled at (the sidecar binds 127.0.0.1).
LOOPBACK = {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1", "::1": "[::1]"}
#: The dashboard's largest file (main.js) is 2.4 MB; anything much larger is not the dashboard.
MAX_RESPONSE_BYTES = 32 << 20
MAX_REQUEST_BYTES = 1 << 20
CONNECT_TIMEOUT = 5.0
#: Request headers passed on (never the cookie or the Jupyter token).
REQUEST_HEADERS = ("Accept", "Accept-Language", "Content-Type", "If-None-Match", "If-Modified-Since")
RESPONSE_HEADERS = (
    "Content-Type",
    "Cache-Control",
    "ETag",
    "Last-Modified",
    "Content-Disposition",
    "Expires",
)
APPLY_HINT = "%job apply --local hosts=2 --telemetry starts a job with the dashboard"


class Refusal(Exception):
    """The request cannot be forwarded: an HTTP status and one line saying what to do."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Route(NamedTuple):
    """A proxied path: the context's folder (relative to the server root) and the rest."""

    context_dir: str
    rest: str  # "" (no slash yet) or an absolute path of the dashboard's, "/..."


def split_path(path: str) -> Route:
    """``nb/.monarch/default/api/summary`` → ``Route("nb/.monarch/default", "/api/summary")``
    (``path`` as tornado hands it over: already unquoted)."""
    match = PATH_RE.match(path)
    if match is None or "\0" in path or ".." in match["dir"].split("/"):
        raise Refusal(
            404, f"not a context's dashboard path: {path!r} (expected <folder>/.monarch/<context>/)"
        )
    return Route(match["dir"], match["rest"] or "")


def context_name(context_dir: str) -> str:
    return context_dir.rsplit("/", 1)[-1]


def target(status: dict[str, Any] | None, context: str) -> str:
    """The dashboard's base URL (``http://127.0.0.1:PORT``) from a context's status.json.

    Raises :class:`Refusal` when the context has no job, no dashboard, or a URL that is not ours."""
    if status is None:
        raise Refusal(404, f"context {context!r} has no job status: {APPLY_HINT}")
    urls = status.get("urls")
    url = (urls.get("dashboard") or urls.get("telemetry")) if isinstance(urls, dict) else None
    if not isinstance(url, str) or not url:
        state = status.get("state") if isinstance(status.get("state"), str) else "unknown"
        raise Refusal(404, f"context {context!r} has no dashboard (job state: {state}): {APPLY_HINT}")
    return loopback_base(url)


def loopback_base(url: str) -> str:
    """``scheme://host:port`` of a recorded loopback http URL, the host as dialled; else Refusal."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        port, parts = None, None
    host = parts.hostname if parts is not None else None
    if parts is None or parts.scheme != "http" or parts.username or parts.password or port is None:
        raise Refusal(502, f"the recorded dashboard URL {url!r} is not a loopback http URL: not proxied")
    if host not in LOOPBACK:
        raise Refusal(403, f"the recorded dashboard URL {url!r} is not on loopback: not proxied")
    return f"http://{LOOPBACK[host]}:{port}"


def check_owner(owners: set[int] | None, uid: int, base: str) -> None:
    """Refuse a target whose port is not held by this user: a sidecar that stopped leaves its
    port free for anyone, and what answers there would run in the Jupyter server's origin."""
    if owners is None:
        raise Refusal(
            503, f"cannot tell who listens at {base} (/proc/net/tcp unreadable or too large): not proxied"
        )
    if not owners:
        raise Refusal(
            502,
            f"nothing listens at {base}: is the job still running? %job shows it; %job apply starts it again",
        )
    if owners != {uid}:
        raise Refusal(
            403,
            f"{base} is held by another user (the job's sidecar stopped and its port was taken?): "
            "not proxied; %job apply starts the job again",
        )


def check_sidecar(ports: set[int] | None, port: int, base: str) -> None:
    """Refuse a target that is not a port the job's own sidecar listens on (``ports``: those of
    the process holding the job's sidecar lock, None when none of ours does): a status.json names
    any port, and whatever of ours answers there would be served in the Jupyter server's origin."""
    if ports is None:
        raise Refusal(
            403,
            f"{base} is not the job's sidecar (no sidecar of yours runs for the job the status names): "
            "not proxied; %job apply starts the job again",
        )
    if port not in ports:
        raise Refusal(403, f"{base} is not a port the job's sidecar listens on: not proxied")


def upstream_url(base: str, rest: str, query: str) -> str:
    """The dashboard URL a proxied request asks for."""
    path = urllib.parse.quote(rest or "/", safe="/:@!$&'()*+,;=-._~%")
    return f"{base}{path}" + (f"?{query}" if query else "")


_ATTR_RE = re.compile(rb"""(\s(?:src|href|action)\s*=\s*["'])/(?!/)""", re.I)
_HEAD_RE = re.compile(rb"<head[^>]*>", re.I)

#: Prefixes the same-origin absolute paths the dashboard's code asks for, and sends Jupyter's
#: XSRF token with them (a POST through the server needs it, like every other route).
_SHIM = """<script>(function(){
var P=%s;
function fix(u){return typeof u==="string"&&u.charAt(0)==="/"&&u.charAt(1)!=="/"&&u.indexOf(P+"/")!==0?P+u:u;}
function xsrf(){var m=document.cookie.match(/(?:^|; )_xsrf=([^;]*)/);return m?m[1]:"";}
var f=window.fetch;
window.fetch=function(input,init){init=Object.assign({},init||{});var h=new Headers(init.headers||{});
if(xsrf()&&!h.has("X-XSRFToken")){h.set("X-XSRFToken",xsrf());}init.headers=h;
return f.call(this,fix(input),init);};
var o=XMLHttpRequest.prototype.open;
XMLHttpRequest.prototype.open=function(){var a=[].slice.call(arguments);a[1]=fix(a[1]);return o.apply(this,a);};
})();</script>"""


def rewrite_html(body: bytes, prefix: str) -> bytes:
    """The dashboard's page with its absolute ``src``/``href`` under ``prefix`` (the proxied
    root, no trailing slash) and the fetch shim first in its ``<head>``."""
    quoted = prefix.encode()
    body = _ATTR_RE.sub(lambda m: m.group(1) + quoted + b"/", body)
    shim = (_SHIM % json.dumps(prefix)).encode()
    head = _HEAD_RE.search(body)
    at = head.end() if head else 0
    return body[:at] + shim + body[at:]


def rewrite_location(location: str, base: str, prefix: str) -> str:
    """A redirect of the dashboard's, kept under ``prefix``; a redirect elsewhere is dropped."""
    if location.startswith(base):
        location = location[len(base) :] or "/"
    if location.startswith("/") and not location.startswith("//"):
        return prefix + location
    return prefix + "/"


def error_page(message: str) -> str:
    """A one-line HTML page for a browser (or an iframe) that asked for the dashboard."""
    import html

    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Monarch dashboard</title></head>"
        f"<body><p class='monarch-dashboard-error'>Monarch dashboard: {html.escape(message)}</p></body></html>"
    )
