"""One bounded HTTP request to a job's service on loopback (the mesh admin, the telemetry store).

No proxy (the service is on this machine), a timeout on every read, and an answer over
``max_bytes`` refused: at once when its Content-Length says so, else as soon as the chunks read
pass the bound, which are then dropped (a refusal holds no buffer: IPython keeps the last
error, and with it every frame it went through). Callers turn the three failures into their
own one-line errors; an HTTP error status reaches them as urllib's ``HTTPError``.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any


class Unanswered(Exception):
    """The service did not answer (refused, reset, timed out); ``str()`` is the reason."""


class TooLarge(Exception):
    """The answer was over the caller's bound."""


CHUNK = 1 << 20  # bytes read at a time


def read_bounded(response: Any, max_bytes: int) -> bytes | None:
    """The body of ``response`` if it is at most ``max_bytes``, else None with nothing kept."""
    length = response.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > max_bytes:
        return None
    chunks: list[bytes] = []
    size = 0
    while chunk := response.read(min(CHUNK, max_bytes + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            chunks.clear()
            return None
    return b"".join(chunks)


def fetch(request: str | urllib.request.Request, timeout: float, max_bytes: int) -> tuple[str, bytes]:
    """``(content type, body)`` of ``request``; raises ``HTTPError``, :class:`Unanswered` or
    :class:`TooLarge`."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            kind = response.headers.get("Content-Type", "")
            body = read_bounded(response, max_bytes)
    except urllib.error.HTTPError:
        raise
    except (urllib.error.URLError, OSError) as error:
        raise Unanswered(str(getattr(error, "reason", error))) from None
    if body is None:
        raise TooLarge()
    return kind, body
