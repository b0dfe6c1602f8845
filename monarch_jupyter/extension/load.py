"""``%load_ext monarch_jupyter``: the one place that wires the session, the magics, the views and
their hooks together. The job side and ``%%remote`` do not import the views, nor ``%job`` the runs:
each gets what it needs from here, so no package imports the one that imports it."""

from __future__ import annotations

from typing import Any

from ..jobs.facade import JobContext
from ..jobs.status import JobStatus
from ..jobs.verbs.registry import JobHooks


def load(ipython: Any, session: JobContext) -> None:
    """Register the magics on ``ipython`` for ``session`` and re-attach to the context's job in the
    background; print what a user must know at once (an unsafe Monarch log, leftovers reaped,
    runs a previous kernel left running)."""
    from ..runtime.monarch_log import secure

    unsafe = secure()  # before Monarch loads and opens its own log (see runtime/monarch_log.py)
    if unsafe:
        print(unsafe)
    from ..jobs.magic import JobMagics
    from ..jobs.warmup import begin
    from ..remote.cell.magic import register as register_remote
    from ..runtime.chatter import install
    from ..runtime.log import from_env

    from_env()  # %env MONARCH_JUPYTER_DEBUG=1 before %load_ext: every record shows (runtime/log.py)
    install()
    cover_every_mesh(ipython, session)  # this_host(), jobs built in cells: once monarch.actor is imported
    ipython.register_magics(JobMagics(ipython, session, job_hooks(ipython)))
    remote = register_remote(ipython, session)
    _plug_in_views(ipython, remote)
    from ..jobs.services.complete import register as register_completion

    register_completion(ipython, session)  # %job query's table names
    from .completion import install as install_completion

    install_completion(ipython, session)  # Tab on %job, %%remote, %remote (completion.py)
    from ..system.orphans import reap_leftovers, reaped_line

    leftovers = reaped_line(reap_leftovers(session.layout.dir))  # workers of an apply that never completed
    if leftovers:
        print(f"monarch_jupyter: {leftovers}")
    # a cached job attaches in the background (see jobs/warmup.py), then the actors of %%remote
    print(begin(session, ipython, after=lambda: prewarm_remote(session)))
    note = runs_note(session)  # the runs a previous kernel left running (no Monarch import)
    if note:
        print(note)


def cover_every_mesh(ipython: Any, session: JobContext) -> None:
    """Have ``actors/`` cover every proc mesh the kernel spawns (``this_host()``, a job built in a
    cell, the job's hosts) from the statement that first imports ``monarch.actor``, without
    importing Monarch (or ``actors/``) now.

    ``actors.enable`` needs the main thread (the debugger's signal handler, IPython's hooks): an
    import on another thread (the job attaching in the background) leaves it to the next cell."""
    import sys
    import threading

    from ..runtime.after_import import held, when_imported

    def enable() -> None:
        from ..actors import enable

        enable(session, ipython)

    def on_main_thread() -> None:
        # not inside %job apply's import of a spec: its engine may still set Monarch's transport
        # (before_cell, at the next cell, enables then)
        if threading.current_thread() is threading.main_thread() and not held():
            enable()

    def before_cell(*_: Any) -> None:
        if "monarch.actor" in sys.modules:
            ipython.events.unregister("pre_run_cell", before_cell)
            enable()

    ipython.events.register("pre_run_cell", before_cell)
    when_imported("monarch.actor", on_main_thread)


def _plug_in_views(ipython: Any, remote: Any) -> None:
    """In a kernel with widgets, every ``%%remote`` run of ``remote`` shows the live rank grid;
    the widgets' and a run's modules are imported in the background once the loading cell ends."""
    from ..widgets import in_widget_kernel, install_run_grid, preload  # cheap: no ipywidgets import

    if in_widget_kernel(ipython):
        from ..remote.cell.magic import RUN_MODULES

        install_run_grid(remote)
        preload(ipython, also=RUN_MODULES)


def prewarm_remote(session: JobContext) -> None:
    """After a restart's background attach: spawn the ``%%remote`` actors a context that ran
    ``%%remote`` before will want, so its first run after the restart finds them warm (the spawn
    is ~0.3–1 s of mostly waiting; a context with no run recorded spawns nothing)."""
    from ..remote.cell import verbs

    if not verbs.has_records(session):
        return
    from ..remote.run.runner import runner_for

    runner_for(session).prewarm()


def job_hooks(ipython: Any) -> JobHooks:
    """``%job``'s view and runs hooks for ``ipython``."""

    def show_status(session: JobContext, status: JobStatus) -> bool:
        from ..widgets import in_widget_kernel

        if not in_widget_kernel(ipython):
            return False
        from IPython.display import display

        from ..widgets.job import JobWidget

        # One static output (text, HTML, our payload), updated by display id on every later
        # status of its context, so the saved notebook shows the last state (nbval ignores
        # update_display_data; nbclient and Lab apply it).
        widget = JobWidget(session, status, sample=_sample_topology, publish=_update_display)
        display(widget.static_bundle(), raw=True, display_id=widget.display_id)
        return True

    return JobHooks(show_status=show_status, stop_runs=stop_runs, runs_note=runs_note)


def _update_display(bundle: dict[str, object], display_id: str) -> None:
    from IPython.display import display

    display(bundle, raw=True, display_id=display_id, update=True)


def stop_runs(session: JobContext) -> str | None:
    """Stop the context's ``%%remote`` runs before its job is killed, not left running unseen."""
    from ..remote.cell import verbs
    from ..remote.cell.verbs import sessions

    if not verbs.has_records(session) and sessions.sessions_note(session) is None:
        return None  # no run or session recorded: no runner (its imports) needed
    from ..remote.run.runner import runner_for

    runner = runner_for(session)
    lines = [verbs.stop_for_kill(session, runner), sessions.stop_for_kill(session, runner)]
    return "\n".join(line for line in lines if line) or None


def runs_note(session: JobContext) -> str | None:
    """One line about the context's ``%%remote`` runs still running (``%remote runs`` has the rest)."""
    from ..remote.cell import verbs
    from ..remote.cell.verbs import sessions

    lines = [verbs.restart_note(session), sessions.sessions_note(session)]
    return "\n".join(line for line in lines if line) or None


def _sample_topology(urls: dict[str, str | None], previous: Any) -> Any:
    """The widget's topology sampler: ``services.admin.sample`` (urllib's HTTP stack), imported
    when a view first samples, not by ``%job``."""
    from ..jobs.services.admin import sample

    return sample(urls, previous)
