"""One bounded HTTP request to a job's service on loopback (the mesh admin, the telemetry store).

No proxy (the service is on this machine), a timeout on every read, and an answer over
``max_bytes`` refused instead of read into memory. Callers turn the three failures into their
own one-line errors; an HTTP error status reaches them as urllib's ``HTTPError``.
"""

from __future__ import annotations

import urllib.error
import urllib.request


class Unanswered(Exception):
    """The service did not answer (refused, reset, timed out); ``str()`` is the reason."""


class TooLarge(Exception):
    """The answer was over the caller's bound."""


def fetch(request: str | urllib.request.Request, timeout: float, max_bytes: int) -> tuple[str, bytes]:
    """``(content type, body)`` of ``request``; raises ``HTTPError``, :class:`Unanswered` or
    :class:`TooLarge`."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            kind = response.headers.get("Content-Type", "")
            body = response.read(max_bytes + 1)
    except urllib.error.HTTPError:
        raise
    except (urllib.error.URLError, OSError) as error:
        raise Unanswered(str(getattr(error, "reason", error))) from None
    if len(body) > max_bytes:
        raise TooLarge()
    return kind, body
