"""The server extension's settings, in Jupyter's config system::

    # jupyter_server_config.py
    c.MonarchJupyter.poll_interval = 10     # seconds between the sidebar's refreshes
    c.MonarchJupyter.scan_depth = 2         # folder levels searched for .monarch/
    c.MonarchJupyter.dashboard_timeout = 60 # seconds a proxied dashboard request may take

or ``jupyter lab --MonarchJupyter.scan_depth=2``.
"""

from __future__ import annotations

from traitlets import Float, Int
from traitlets.config import Configurable

from .contexts import MAX_RUN_FILES, MAX_SUBFOLDERS, SCAN_DEPTH, Limits


class MonarchJupyter(Configurable):
    """Settings of the monarch_jupyter server extension and its JupyterLab sidebar."""

    poll_interval = Float(
        3.0,
        min=0.5,
        config=True,
        help="Seconds between two refreshes of the Monarch sidebar while it is visible.",
    )
    scan_depth = Int(
        SCAN_DEPTH,
        min=0,
        max=4,
        config=True,
        help="Folder levels below the listed folder searched for .monarch/ (0: that folder only).",
    )
    max_subfolders = Int(
        MAX_SUBFOLDERS, min=1, config=True, help="Subfolders looked into per folder level (sorted by name)."
    )
    max_run_files = Int(
        MAX_RUN_FILES,
        min=1,
        config=True,
        help="Newest runs-index entries read per context for its running runs.",
    )

    dashboard_timeout = Float(
        60.0,
        min=1.0,
        config=True,
        help="Seconds a request proxied to a job's Monarch dashboard may take before it fails (504).",
    )

    def limits(self) -> Limits:
        return Limits(depth=self.scan_depth, subfolders=self.max_subfolders, run_files=self.max_run_files)
