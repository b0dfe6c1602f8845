"""The ``%job`` widget: a live view over one context's :class:`JobStatus`.

``job_view`` (status → view data) and ``details_html`` / ``header_html`` (view
data → HTML) are pure; ``JobWidget`` only wires them to ipywidgets and to the
session: it re-renders on every status the session publishes for its context
(apply, kill, status, attach, context switch — from any cell), and its Refresh
and Kill buttons call the session like ``%job status`` / ``%job kill`` do.

Displayed, the widget carries ``text/plain`` and ``text/html`` fallbacks (the
``%job`` text block and table), so terminals, nbconvert and nbval see the same
information without a widget front end.
"""

from __future__ import annotations

import contextlib
import html
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import ipywidgets as widgets

from .. import _timefmt, formatting
from ..errors import MonarchJupyterError
from ..status import NO_JOB, NOT_RUNNING, RUNNING, WORKERS_DEAD, JobStatus

STATE_COLOURS = {
    RUNNING: "#1a7f37",
    NOT_RUNNING: "#6e7781",
    WORKERS_DEAD: "#cf222e",
    NO_JOB: "#6e7781",
}
_URL_LABELS = {"telemetry": "telemetry", "dashboard": "dashboard", "admin": "admin"}


@dataclass(frozen=True)
class MeshRow:
    name: str
    hosts: str
    live_workers: str


@dataclass(frozen=True)
class JobView:
    """Everything the widget shows, as strings: the pure result of ``job_view``."""

    context: str
    state: str
    colour: str
    job_class: str
    apply_id: str
    spec: str
    applied: str
    meshes: list[MeshRow] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # (label, url), http(s) only
    other_urls: list[tuple[str, str]] = field(default_factory=list)  # non-http addresses, shown as text
    can_kill: bool = False
    hint: str = ""

    @property
    def total_hosts(self) -> int | None:
        counts = [int(m.hosts) for m in self.meshes if m.hosts.isdigit()]
        return sum(counts) if counts else None


def job_view(status: JobStatus, now: float | None = None) -> JobView:
    """Turn a status snapshot into view data (no I/O, no widgets)."""
    now = time.time() if now is None else now
    applied = "-"
    if status.applied_at:
        applied = f"{_timefmt.age(now - status.applied_at)} ago"
    links: list[tuple[str, str]] = []
    other: list[tuple[str, str]] = []
    for key, url in status.urls.items():
        if not url:
            continue
        label = _URL_LABELS.get(key, key)
        (links if url.startswith(("http://", "https://")) else other).append((label, url))
    hint = ""
    if status.state == NO_JOB:
        hint = "%job apply --local hosts=2 starts a local job"
    elif status.state == WORKERS_DEAD:
        hint = "the workers are gone: %job apply starts a new job, Kill clears the cache"
    elif status.state == NOT_RUNNING:
        hint = "%job apply starts it"
    return JobView(
        context=status.context,
        state=status.state,
        colour=STATE_COLOURS.get(status.state, "#6e7781"),
        job_class=status.job_class or "-",
        apply_id=status.apply_id or "-",
        spec=status.spec or "-",
        applied=applied,
        meshes=[
            MeshRow(
                m.name,
                "?" if m.hosts is None else str(m.hosts),
                "?" if m.live_workers is None else str(m.live_workers),
            )
            for m in status.meshes
        ],
        links=links,
        other_urls=other,
        can_kill=status.state != NO_JOB,
        hint=hint,
    )


def badge_html(view: JobView) -> str:
    return (
        f'<span class="monarch-job-state" data-state="{html.escape(view.state)}" '
        f'style="background:{view.colour};color:#fff;border-radius:8px;padding:1px 8px">'
        f"{html.escape(view.state)}</span>"
    )


def header_html(view: JobView) -> str:
    return (
        f"<b>Monarch job</b> · context <code class='monarch-job-context'>{html.escape(view.context)}</code> "
        f"{badge_html(view)}"
    )


def details_html(view: JobView) -> str:
    """Class / apply id / spec rows, the mesh table and the links."""
    esc = html.escape
    rows = []
    if view.state != NO_JOB:
        rows += [("class", view.job_class), ("apply id", view.apply_id), ("applied", view.applied)]
    rows.append(("spec", view.spec))
    rows += [(label, url) for label, url in view.other_urls]
    cells = "".join(
        f"<tr><th style='text-align:left;padding-right:12px'>{esc(k)}</th>"
        f"<td style='text-align:left' class='monarch-job-{esc(k.replace(' ', '-'))}'>{esc(v)}</td></tr>"
        for k, v in rows
    )
    parts = [f"<table class='monarch-job-info'>{cells}</table>"]
    if view.meshes:
        mesh_rows = "".join(
            f"<tr class='monarch-job-mesh' data-mesh='{esc(m.name)}'><td>{esc(m.name)}</td>"
            f"<td class='monarch-job-hosts' style='text-align:right'>{esc(m.hosts)}</td>"
            f"<td class='monarch-job-live' style='text-align:right'>{esc(m.live_workers)}</td></tr>"
            for m in view.meshes
        )
        parts.append(
            "<table class='monarch-job-meshes' style='margin-top:4px'>"
            "<tr><th style='text-align:left'>mesh</th><th>hosts</th><th>live workers</th></tr>"
            f"{mesh_rows}</table>"
        )
    if view.links:
        links = " · ".join(
            f"<a href='{esc(url)}' target='_blank' rel='noopener'>{esc(label)}</a>"
            for label, url in view.links
        )
        parts.append(f"<div class='monarch-job-links'>{links}</div>")
    parts.append(dashboard_link_html(view))
    if view.hint:
        parts.append(f"<div class='monarch-job-hint' style='color:#6e7781'>{esc(view.hint)}</div>")
    return "".join(parts)


def dashboard_link_html(view: JobView) -> str:
    """ "Monarch dashboard" for a running job with telemetry: the labextension opens it through the
    Jupyter server (``a[data-monarch-dashboard]``, by apply id); the href is the loopback URL,
    for a browser on this machine without the labextension. Empty when there is none."""
    urls = dict(view.links)
    url = urls.get("dashboard") or urls.get("telemetry")
    if view.state != RUNNING or not url:
        return ""
    esc = html.escape
    return (
        f"<div class='monarch-job-dashboard-row'><a class='monarch-job-dashboard' href='{esc(url)}' "
        f"data-monarch-dashboard='{esc(view.apply_id)}' data-monarch-context='{esc(view.context)}' "
        "target='_blank' rel='noopener' title='Open the Monarch dashboard through the Jupyter server'>"
        "Monarch dashboard</a></div>"
    )


class StatusSource(Protocol):
    """What the widget asks of the session (``session.JobSession``, which views do not import)."""

    @property
    def root(self) -> Path: ...

    def status(self, context: str | None = None) -> JobStatus: ...

    def kill(self, context: str | None = None) -> JobStatus: ...

    def add_listener(self, listener: Callable[[JobStatus], None]) -> Callable[[], None]: ...


class JobWidget(widgets.VBox):
    """A context's job, kept current from the session's published statuses."""

    def __init__(
        self, session: StatusSource, status: JobStatus | None = None, context: str | None = None
    ) -> None:
        status = status if status is not None else session.status(context)
        self.session = session
        self.context = status.context
        self.status = status
        self._root = _resolved(session.root)
        self._head = widgets.HTML()
        self._details = widgets.HTML()
        self._message = widgets.HTML()
        self._refresh = _button("Refresh", "refresh", "", "monarch-job-refresh", self._on_refresh)
        self._kill = _button("Kill", "times", "danger", "monarch-job-kill", self._on_kill)
        self._confirm = _button("Confirm kill", "check", "danger", "monarch-job-confirm", self._on_confirm)
        self._cancel = _button("Cancel", "", "", "monarch-job-cancel", self._on_cancel)
        self._confirm_row = widgets.HBox(
            [widgets.HTML("Kill this job and reap its workers?"), self._confirm, self._cancel],
            layout=widgets.Layout(display="none"),
        )
        self._confirm_row.add_class("monarch-job-confirm-row")
        super().__init__(
            [
                self._head,
                self._details,
                widgets.HBox([self._refresh, self._kill]),
                self._confirm_row,
                self._message,
            ]
        )
        self.add_class("monarch-job-widget")
        self._unsubscribe: Callable[[], None] | None = session.add_listener(self._on_status)
        self.show(status)

    # ── view ──
    def show(self, status: JobStatus) -> None:
        """Render ``status`` (the one place the widget's children change)."""
        self.status = status
        view = job_view(status)
        self.view = view
        self._head.value = header_html(view)
        self._details.value = details_html(view)
        self._kill.disabled = not view.can_kill
        if not view.can_kill:
            self._confirm_row.layout.display = "none"
            self._kill.layout.display = None

    def _on_status(self, status: JobStatus) -> None:
        if status.context != self.context:
            return
        try:
            if _resolved(self.session.root) != self._root:
                return  # the same context name in another folder (after %cd)
        except OSError:
            return
        self.show(status)

    def _say(self, text: str, error: bool = False) -> None:
        colour = "#cf222e" if error else "#6e7781"
        self._message.value = (
            f"<span style='color:{colour}'>{html.escape(text, quote=False)}</span>" if text else ""
        )

    # ── buttons ──
    def _on_refresh(self, _button: Any = None) -> None:
        try:
            self.show(self.session.status(self.context))
            self._say("")
        except MonarchJupyterError as error:
            self._say(str(error), error=True)

    def _on_kill(self, _button: Any = None) -> None:
        self._kill.layout.display = "none"
        self._confirm_row.layout.display = None

    def _on_cancel(self, _button: Any = None) -> None:
        self._confirm_row.layout.display = "none"
        self._kill.layout.display = None

    def _on_confirm(self, _button: Any = None) -> None:
        self._on_cancel()
        self._kill.disabled = self._refresh.disabled = True
        self._say("killing…")
        try:
            killed = self.session.kill(self.context)
        except MonarchJupyterError as error:
            with contextlib.suppress(MonarchJupyterError):
                self.show(self.session.status(self.context))
            self._say(str(error), error=True)
        else:
            self._say(formatting.kill_line(killed))
        finally:
            self._refresh.disabled = False
            self._kill.disabled = not self.view.can_kill

    # ── lifetime / display ──
    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        super().close()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        data = super()._repr_mimebundle_(**kwargs) or {}
        data["text/plain"] = formatting.status_text(self.status)
        data["text/html"] = formatting.status_html(self.status)
        return data


def _button(text: str, icon: str, style: str, css: str, handler: Callable[[Any], None]) -> widgets.Button:
    button = widgets.Button(
        description=text, icon=icon, button_style=style, layout=widgets.Layout(width="auto")
    )
    button.add_class(css)
    button.on_click(handler)
    return button


def _resolved(path: Path) -> Path:
    return Path(path).resolve()
