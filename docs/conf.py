"""Sphinx configuration of the monarch_jupyter docs (MyST Markdown, notebooks through myst-nb).

Built by ``scripts/test.sh`` with warnings as errors (``-W --keep-going -n``): a broken
cross-reference, a missing page or anchor, or a stale include fails the test command. The
reference pages are written from the magics' own parsers and settings, so they cannot drift.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(REPO))  # the checkout's package, not an installed copy
sys.path.insert(0, str(DOCS / "_ext"))

project = "monarch_jupyter"
author = "monarch_jupyter contributors"
copyright = "the monarch_jupyter contributors"

extensions = ["myst_nb", "monarch_reference"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3  # [text](page.md#a-heading) links are checked
nb_execution_mode = "off"  # the tutorials show the outputs saved in notebooks/ (run by nbval in the tests)
nitpicky = True

exclude_patterns = ["_build", "jupyter_execute", ".ipynb_checkpoints"]
html_theme = "furo"
html_title = "monarch_jupyter"
html_static_path = ["_static"]


def _copy_notebooks() -> None:
    """The tutorials are the repository's notebooks, copied beside their pages at each build
    (Sphinx reads only its source folder; the copies are ignored by git)."""
    target = DOCS / "tutorial" / "notebooks"
    target.mkdir(exist_ok=True)
    for notebook in sorted((REPO / "notebooks").glob("*.ipynb")):
        shutil.copyfile(notebook, target / notebook.name)


_copy_notebooks()

# A %%remote cell saves its payload for the labextension's renderer beside text/html and
# text/plain copies: the docs show the HTML copy, as nbconvert does.
nb_mime_priority_overrides = [
    ("*", "application/vnd.monarch.remote+json", None),
    ("*", "application/vnd.monarch.job+json", None),
]
# a run's lines arrive as many stream messages: one box per cell's stream, as Jupyter shows them
nb_merge_streams = True
# the HTML copies' tables (a run's ranks, a job's rows) get the page's table style
html_css_files = ["monarch.css"]
nb_render_error_lexer = "text"  # our errors are plain text (rank sections), not IPython tracebacks
# myst-nb renders every type of a bundle before choosing one, and warns on the types it has no
# renderer for: ours is the only such type the notebooks save, and it is dropped above
suppress_warnings = ["mystnb.unknown_mime_type"]
