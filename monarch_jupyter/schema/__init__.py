"""The one definition of ``%%remote``'s status vocabulary and saved-output format.

``remote-run.schema.json`` is a JSON Schema of the
``application/vnd.monarch.remote+json`` payload. Its ``$defs`` name every rank
status (``status``), the statuses a rank ends as (``finalStatus``, the keys of the
payload's ``summary``) and the failing ones (``failingStatus``). The Python model
reads them from here; ``labextension/src/model.ts`` and ``widgets/run.js`` are
checked against this file by the jest tests (and the payload by pytest and jest).
Neither the payload nor a rank takes properties the schema does not name.

``run_entry.schema.json`` is a JSON Schema of one entry of the runs index
(``.monarch/<context>/runs/<id>.json``, written by ``remote/run/index.py``, read by the
server extension); the tests check that its properties are ``RunEntry``'s fields.

``widget-messages.schema.json`` is a JSON Schema of the widgets' custom messages, both
ways (the run grid's requests and answers, the ``%job`` widget's requests); the tests
check that its kinds are those the Python handlers and the TypeScript read and send.
"""

from __future__ import annotations

import json
from pathlib import Path

PATH = Path(__file__).with_name("remote-run.schema.json")
RUN_ENTRY_PATH = Path(__file__).with_name("run_entry.schema.json")  # read by the tests only
WIDGET_MESSAGES_PATH = Path(__file__).with_name("widget-messages.schema.json")  # read by the tests only
SCHEMA: dict = json.loads(PATH.read_text(encoding="utf-8"))

MIME_TYPE: str = SCHEMA["x-mime-type"]
VERSION: int = max(SCHEMA["properties"]["version"]["enum"])  # written; older versions still render
STATUSES: tuple[str, ...] = tuple(SCHEMA["$defs"]["status"]["enum"])  # every status, display order
FINAL_STATUSES: tuple[str, ...] = tuple(SCHEMA["$defs"]["finalStatus"]["enum"])
FAILING_STATUSES: tuple[str, ...] = tuple(SCHEMA["$defs"]["failingStatus"]["enum"])


def status(name: str) -> str:
    """``name`` if the schema defines that status (so code can name statuses safely)."""
    if name not in STATUSES:
        raise ValueError(f"{name!r} is not a status of {PATH.name} (one of {', '.join(STATUSES)})")
    return name
