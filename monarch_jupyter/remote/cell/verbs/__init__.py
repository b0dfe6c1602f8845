"""The ``%remote VERB …`` forms: each verb's parser and handler, registered together.

A verb is one :func:`verb`-decorated function: its name, the line ``%%remote?`` shows for it,
its arguments (:func:`arg`, as ``argparse``'s ``add_argument``) and its handler, called with the
:class:`Cell` it runs in and its parsed options as keywords. The parser goes where
``%remote``'s line is parsed (:data:`.args.VERBS`), the handler into :data:`REGISTRY`; the
magic looks a verb up there, and ``%%remote?`` lists them all. A handler's
:class:`~..errors.MonarchJupyterError` is shown as one ``%remote VERB: …`` line, a
:class:`~.errors.RemoteError` (a rank failed) as the error of the cell.

Adding a verb, e.g. ``%remote stacks`` (each rank's Python stacks), is one endpoint on the
actor and one entry in the module of its family (:mod:`.runs`: runs that outlive their kernel;
:mod:`.diagnose`: looking into runs and procs), declared with :mod:`.registry`::

    @verb("stacks", "each rank's Python stacks", arg("--native", action="store_true", help="…"))
    def stacks(cell: Cell, native: bool) -> None:
        for text in cell.runner.call_all("stacks", native):
            cell.write(text)

The verbs are declared when this package is imported (``%load_ext``), each handler importing
what it runs with when it runs. Today's verbs are about runs that outlive their kernel
(``%%remote --detach``, a restart): ``runs`` lists the context's runs (:mod:`...run.index`), asking their hosts which still run;
``attach`` follows one (the kept tail per rank, then live); ``stop`` stops runs on every host;
``stacks`` shows what a run's processes are doing, identical stacks folded (:mod:`...view.stacks`);
``shell`` a terminal with a shell on one rank (:mod:`..rank_shell`).
"""

from __future__ import annotations

# their verbs register as they are imported: runs' first (diagnose imports it), as %%remote? lists them
from . import diagnose, runs, sessions  # noqa: F401
from .diagnose import grid_stacks, grid_usage
from .registry import REGISTRY, Cell, Handler, Verb, arg, dispatch, verb
from .runs import has_records, restart_note, runs_text, state_text, stop_for_kill

__all__ = [
    "REGISTRY",
    "Cell",
    "Handler",
    "Verb",
    "arg",
    "dispatch",
    "grid_stacks",
    "grid_usage",
    "has_records",
    "restart_note",
    "runs_text",
    "state_text",
    "stop_for_kill",
    "verb",
]
