"""One topology sample from Monarch's mesh admin (``/v1/{ref}`` on its loopback HTTP server).

The admin answers one node per request: root → hosts → procs → actors. A sample reads every
host and proc and, by default, only the user's actors (a proc lists its system actors apart),
each level's requests side by side. The telemetry store's ``actor_nodes`` has the same fields
but only as often as its periodic snapshot (30 s by default) and no memory, so the live view
asks the admin. Every failure is one line (:class:`TopologyError`).
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from ...errors import MonarchJupyterError
from . import local_http, topology

TIMEOUT = 5.0  # seconds per request: the admin is on loopback
MAX_BYTES = 4 << 20  # one node's JSON
WORKERS = 8
RETRIES = 1  # a node the admin could not reach in time (503 under load) is asked once more
RETRY_AFTER = 0.2  # seconds
_SUFFIX = re.compile(r"<[^>]*>$")


class TopologyError(MonarchJupyterError):
    """No admin, or the admin did not answer (one line)."""


def admin_url(urls: dict[str, str | None]) -> str:
    """The job's admin URL from its status URLs; TopologyError saying how to get one."""
    url = urls.get("admin")
    if not url or not url.startswith(("http://", "https://")):
        raise TopologyError(
            "the running job has no mesh admin: %job apply --local hosts=2 --admin (or --telemetry) starts one"
        )
    return url.rstrip("/")


def get_node(url: str, ref: str, timeout: float = TIMEOUT) -> dict[str, Any]:
    """One node's JSON (``{"identity", "properties", "children", "parent", "as_of"}``)."""
    target = f"{url}/v1/{urllib.parse.quote(ref, safe='')}"
    try:
        _, body = local_http.fetch(target, timeout, MAX_BYTES)
    except urllib.error.HTTPError as error:
        raise TopologyError(f"the mesh admin answered {error.code} for {ref}") from None
    except local_http.Unanswered as reason:
        raise TopologyError(
            f"the mesh admin at {url} did not answer ({reason}); %job shows the job"
        ) from None
    except local_http.TooLarge:
        raise TopologyError(f"the mesh admin's answer for {ref} is over {MAX_BYTES >> 20} MiB") from None
    try:
        node = json.loads(body)
    except ValueError:
        raise TopologyError(f"the mesh admin answered something other than JSON for {ref}") from None
    return node if isinstance(node, dict) else {}


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _props(node: dict[str, Any], kind: str) -> dict[str, Any]:
    props = node.get("properties")
    found = props.get(kind) if isinstance(props, dict) else None
    return found if isinstance(found, dict) else {}


def _children(node: dict[str, Any]) -> list[str]:
    children = node.get("children")
    return [str(child) for child in children] if isinstance(children, list) else []


def _stamp(value: object) -> float | None:
    """Epoch seconds of an admin time (ISO text or microseconds)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value / 1e6
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _short(ref: str) -> str:
    """``counter<jdHg…>.anon-0<…>@…`` → ``counter``; a proc ``anon-0<…>@…`` → ``anon-0``."""
    head = ref.split("@", 1)[0].split(".", 1)[0]
    return _SUFFIX.sub("", head) or ref


def host_row(node: dict[str, Any]) -> dict[str, Any]:
    props = _props(node, "Host")
    mem = _dict(props.get("memory"))
    return {
        "kind": "host",
        "id": str(node.get("identity", "")),
        "parent": None,
        "name": str(props.get("addr") or node.get("identity", "")),
        "rss": mem.get("process_rss_bytes"),
    }


def proc_row(node: dict[str, Any], host: str) -> dict[str, Any]:
    props = _props(node, "Proc")
    debug = _dict(props.get("debug"))
    mem = _dict(debug.get("memory"))
    return {
        "kind": "proc",
        "id": str(node.get("identity", "")),
        "parent": host,
        "name": str(props.get("proc_name") or _short(str(node.get("identity", "")))),
        "rss": mem.get("process_rss_bytes"),
        "queue": debug.get("actor_work_queue_depth_total", 0),
    }


def actor_row(node: dict[str, Any], proc: str) -> dict[str, Any]:
    props = _props(node, "Actor")
    handlers = _dict(props.get("execution")).get("active_handlers")
    handlers = handlers if isinstance(handlers, list) else []
    now = _stamp(node.get("as_of")) or time.time()
    since = [
        (_stamp(h.get("oldest_since")), str(h.get("name") or "")) for h in handlers if isinstance(h, dict)
    ]
    oldest, busy_in = min(((s, n) for s, n in since if s is not None), default=(None, ""))
    ident = str(node.get("identity", ""))
    return {
        "kind": "actor",
        "id": ident,
        "parent": proc,
        "name": _short(ident),
        "status": str(props.get("actor_status") or "?").split(":")[0].strip(),
        "messages": props.get("messages_processed", 0),
        "queue": props.get("queue_depth", 0),
        "system": bool(props.get("is_system")),
        "busy_s": None if oldest is None else max(0.0, now - oldest),
        "busy_in": busy_in,
    }


def rows(
    url: str, system: bool = False, get: Callable[[str, str], dict[str, Any]] = get_node
) -> list[dict[str, Any]]:
    """Every host and proc of the admin at ``url`` and their (user, or all with ``system``) actors.
    A node that does not answer (the admin says 503 under load) is a ``missing`` row; only the
    root's failure raises."""
    root = get(url, "root")

    def fetch(ref: str) -> dict[str, Any] | None:
        for attempt in range(RETRIES + 1):
            try:
                return get(url, ref)
            except TopologyError:
                if attempt < RETRIES:
                    time.sleep(RETRY_AFTER)
        return None

    found: list[dict[str, Any]] = []

    def level(refs: list[tuple[str, str | None]]) -> list[tuple[dict[str, Any], str | None]]:
        nodes = list(pool.map(lambda pair: fetch(pair[0]), refs))
        found.extend(
            {"kind": "missing", "id": ref} for (ref, _), node in zip(refs, nodes, strict=True) if node is None
        )
        return [(node, parent) for (_, parent), node in zip(refs, nodes, strict=True) if node is not None]

    with ThreadPoolExecutor(WORKERS) as pool:
        proc_refs: list[tuple[str, str | None]] = []
        for node, _ in level([(ref, None) for ref in _children(root)]):
            found.append(host_row(node))
            proc_refs += [(ref, found[-1]["id"]) for ref in _children(node)]
        actor_refs: list[tuple[str, str | None]] = []
        for node, host in level(proc_refs):
            row = proc_row(node, str(host))
            found.append(row)
            hidden = set() if system else set(map(str, _props(node, "Proc").get("system_children") or []))
            actor_refs += [(ref, row["id"]) for ref in _children(node) if ref not in hidden]
        found += [actor_row(node, str(proc)) for node, proc in level(actor_refs)]
    return found


def sample(
    urls: dict[str, str | None],
    previous: topology.Topology | None = None,
    system: bool = False,
    stuck_after: float = topology.STUCK_AFTER,
) -> topology.Topology:
    """One timed sample of the job's topology; stuck actors judged against ``previous``."""
    started = time.perf_counter()
    found = rows(admin_url(urls), system=system)
    result = topology.build(found, previous, sampled=time.time(), stuck_after=stuck_after)
    result.elapsed = time.perf_counter() - started
    return result
