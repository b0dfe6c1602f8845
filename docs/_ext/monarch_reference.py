"""``{magic-help} job|remote`` and ``{settings-table}``: reference text written from the code.

The magics' help comes from the same argparse definitions that parse their lines (what ``%job?``
and ``%%remote?`` show), and the server settings from the traitlets ``Configurable``, so the
reference cannot say anything the code does not do.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


def _help(magic: str) -> str:
    if magic == "job":
        from monarch_jupyter.jobs.magic import full_doc
    elif magic == "remote":
        from monarch_jupyter.remote.magic import full_doc
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


class SettingsTable(SphinxDirective):
    """Every ``c.MonarchJupyter.*`` setting: name, type, default, help."""

    def run(self) -> list[nodes.Node]:
        from monarch_jupyter._server.config import MonarchJupyter

        table = nodes.table()
        group = nodes.tgroup(cols=4)
        table += group
        for width in (25, 10, 15, 50):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        group += head
        head += _row(["setting", "type", "default", "what it does"])
        body = nodes.tbody()
        group += body
        for name, trait in sorted(MonarchJupyter.class_traits(config=True).items()):
            default = trait.default_value_repr()
            body += _row([f"c.MonarchJupyter.{name}", type(trait).__name__, default, trait.help])
        return [table]


def _row(cells: list[str]) -> nodes.row:
    row = nodes.row()
    for text in cells:
        entry = nodes.entry()
        entry += nodes.paragraph(text=text)
        row += entry
    return row


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("magic-help", MagicHelp)
    app.add_directive("settings-table", SettingsTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
