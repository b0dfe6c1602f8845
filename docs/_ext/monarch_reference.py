"""``{magic-help} job|remote``: the magics' reference, written from the code.

The help comes from the same argparse definitions that parse the magics' lines (what ``%job?``
and ``%%remote?`` show), so the reference cannot say anything the code does not do.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


def _help(magic: str) -> str:
    if magic == "job":
        from monarch_jupyter.jobs.magic import full_doc
    elif magic == "remote":
        from monarch_jupyter.remote.cell.magic import full_doc
    else:
        raise ValueError(f"magic-help takes job or remote, not {magic!r}")
    return full_doc()


class MagicHelp(SphinxDirective):
    """The full ``%MAGIC?`` text as a literal block."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        text = _help(self.arguments[0])
        block = nodes.literal_block(text, text)
        block["language"] = "text"
        return [block]


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("magic-help", MagicHelp)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
