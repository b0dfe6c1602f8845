"""The ``%job`` widget: a live view over one context's :class:`JobStatus`.

``job_view`` (status → view data), ``details_html`` / ``header_html`` (view data → HTML)
and ``actions`` (view data → the buttons, as plain data) are pure; ``JobWidget`` is one
widget model (``job.js``, :mod:`.comm_model`) holding only that plain state. It re-renders on every status
the session publishes for its context (apply, kill, status, attach, context switch — from
any cell); a button sends ``{kind: "action", id}`` and the widget calls the handler
registered for that id (Refresh and Kill call the session like ``%job status`` /
``%job kill`` do). While a view is on screen and the job has a mesh admin, a thread samples
the topology (``services/topology.py``) every :data:`TOPOLOGY_INTERVAL` seconds, or less often
when a sample takes longer than :data:`TOPOLOGY_DUTY` of that; nobody looking, nothing sampled.

Displayed, the widget is one static output (``formatting.job_bundle``): the ``%job`` text block,
its self-contained HTML table, and our payload naming the model, from which the labextension
draws the live view while the model lives. It holds no widget view, so every front end without
our labextension (Lab or Notebook 7 with ipywidgets, VS Code, Colab, nbconvert, GitHub) shows the
HTML, never "model not found". Each status the session publishes (a later ``%job kill`` or
``apply``, in any cell) re-publishes that output by its display id (``publish``), so a saved
notebook holds the last state, with when it was last true.
"""

from __future__ import annotations

import contextlib
import html
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import MonarchJupyterError
from ..jobs import formatting
from ..jobs.services import topology as topo
from ..jobs.status import NO_JOB, NOT_RUNNING, RUNNING, WORKERS_DEAD, JobStatus

if TYPE_CHECKING:
    from ..jobs.specs.base import Spec
    from ..jobs.status import ApplyResult
from ..text import timefmt as _timefmt
from .code import read_code
from .comm_model import Model, Synced

JOB_JS = Path(__file__).with_name("job.js")
JOB_CSS = Path(__file__).with_name("job.css")
#: what Apply starts where no spec was applied before: the hint's local job
DEFAULT_SPEC = "--local hosts=2"
TOPOLOGY_INTERVAL = 2.0  # seconds between topology samples while a view is on screen, at least
TOPOLOGY_DUTY = 0.2  # and at most this share of the time spent sampling (a big job samples less often)
# A view renews its "on screen" every 30 s (job.js); one not renewed for this long is gone (its tab
# closed without saying so). Renewals wait while a cell runs, so this outlasts long cells.
WATCH_TTL = 600.0
#: seconds after which an unchanged status is published again (its "as of" moves on)
REPUBLISH_AFTER = 60.0

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
    applied: str  # local time, "-" when unknown
    applied_at: float | None = None  # epoch seconds: the view shows how long ago, live
    meshes: list[MeshRow] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # (label, url), http(s) only
    other_urls: list[tuple[str, str]] = field(default_factory=list)  # non-http addresses, shown as text
    can_kill: bool = False
    can_apply: bool = False  # no running job: Apply starts the saved spec, else DEFAULT_SPEC
    has_spec: bool = False
    hint: str = ""

    @property
    def total_hosts(self) -> int | None:
        counts = [int(m.hosts) for m in self.meshes if m.hosts.isdigit()]
        return sum(counts) if counts else None


def job_view(status: JobStatus) -> JobView:
    """Turn a status snapshot into view data (no I/O, no clock, no widgets)."""
    applied = _timefmt.local_time(status.applied_at)
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
        colour=formatting.state_colour(status.state),
        job_class=status.job_class or "-",
        apply_id=status.apply_id or "-",
        spec=status.spec or "-",
        applied=applied,
        applied_at=status.applied_at or None,
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
        can_apply=status.state != RUNNING,
        has_spec=bool(status.spec),
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
        f"<td style='text-align:left' class='monarch-job-{esc(k.replace(' ', '-'))}'>{_cell(k, v, view)}</td></tr>"
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
        parts.append(
            f"<div class='monarch-job-hint' style='color:color-mix(in srgb, var(--jp-ui-font-color1, #1f2328) 85%, transparent)'>{esc(view.hint)}</div>"
        )
    return "".join(parts)


def _cell(key: str, value: str, view: JobView) -> str:
    """A details value; the apply time as a <time> the view follows with "· N ago", live."""
    if key == "applied" and view.applied_at:
        return (
            f"<time datetime='{_timefmt.utc_iso(view.applied_at)}' "
            f"data-monarch-since='{view.applied_at:.0f}'>{html.escape(value)}</time>"
        )
    return html.escape(value)


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


@dataclass(frozen=True)
class Action:
    """One button: ``confirm`` asks first (in the browser), ``href`` opens a link instead of
    calling the kernel; other actions call the handler registered under ``id``."""

    id: str
    label: str
    style: str = ""
    confirm: str = ""
    href: str = ""
    disabled: bool = False
    why: str = ""  # why it is disabled: the button's tooltip

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v or k in ("id", "label")}


def actions(view: JobView, busy: bool = False) -> list[Action]:
    """The buttons of ``view``: Apply where no job runs (the saved spec, else DEFAULT_SPEC),
    Refresh, and Kill (confirmed), disabled with a reason where there is no job."""
    shown = []
    if view.can_apply:
        label = "Apply" if view.has_spec else f"Apply {DEFAULT_SPEC.removeprefix('--')}"
        shown.append(Action("apply", label, style="accept", disabled=busy))
    shown.append(Action("refresh", "Refresh", disabled=busy))
    shown.append(
        Action(
            "kill",
            "Kill",
            style="danger",
            confirm="Kill this job and reap its workers?",
            disabled=busy or not view.can_kill,
            why="" if view.can_kill else "no job to kill in this context",
        )
    )
    return shown


def has_admin(status: JobStatus) -> bool:
    """Whether ``status``'s job can be sampled for its topology (running, with an HTTP admin)."""
    url = status.urls.get("admin") or ""
    return status.state == RUNNING and url.startswith(("http://", "https://"))


Sampler = Callable[[dict[str, str | None], topo.Topology | None], topo.Topology]


class StatusSource(Protocol):
    """What the widget asks of the session (``session.JobContext``, which views do not import)."""

    @property
    def root(self) -> Path: ...

    def status(self, context: str | None = None) -> JobStatus: ...

    def kill(self, context: str | None = None) -> JobStatus: ...

    def apply(self, spec: Spec | None = None) -> ApplyResult: ...

    def add_listener(self, listener: Callable[[JobStatus], None]) -> Callable[[], None]: ...


class JobWidget(Model):
    """A context's job, kept current from the session's published statuses (one model)."""

    _esm = read_code(JOB_JS)
    _css = JOB_CSS.read_text()

    head = Synced("")
    details = Synced("")
    actions: Synced[list[dict[str, Any]]] = Synced([])  # Action.to_json() each
    message = Synced("")
    message_error = Synced(False)
    topology_available = Synced(False)
    topology: Synced[dict[str, Any]] = Synced({})  # services.topology.to_data

    def __init__(
        self,
        session: StatusSource,
        status: JobStatus | None = None,
        context: str | None = None,
        sample: Sampler | None = None,
        interval: float = TOPOLOGY_INTERVAL,
        publish: Callable[[dict[str, object], str], None] | None = None,
    ) -> None:
        """``publish(bundle, display_id)`` updates the displayed output (IPython's
        ``update_display``); None: the output is a snapshot (no kernel to update it)."""
        status = status if status is not None else session.status(context)
        super().__init__()
        self.display_id = f"monarch-job-{self.model_id}"
        self._publish = publish
        self._published: dict[str, Any] | None = None  # the status last published (displayed)
        self._published_at = time.monotonic()
        self.session = session
        self.context = status.context
        self.status = status
        self._root = _resolved(session.root)
        self._sample = sample
        self._interval = interval
        self._watchers: dict[str, float] = {}  # view id -> when its "on screen" expires (monotonic)
        self._poller: threading.Thread | None = None
        self._wake = threading.Event()
        self._last: topo.Topology | None = None
        self._busy = False
        self.handlers: dict[str, Callable[[], None]] = {
            "apply": self._on_apply,
            "refresh": self._on_refresh,
            "kill": self._on_kill,
        }
        self.on_msg(self._on_front_end_msg)
        self._unsubscribe: Callable[[], None] | None = session.add_listener(self._on_status)
        self.show(status)
        self._published = asdict(status)  # the caller displays static_bundle() now

    # ── view ──
    def show(self, status: JobStatus) -> None:
        """Render ``status`` (the one place the widget's state changes, topology aside)."""
        self.status = status
        view = job_view(status)
        self.view = view
        with self.hold_sync():
            self.head = header_html(view)
            self.details = details_html(view)
            self.actions = [action.to_json() for action in actions(view, self._busy)]
            self.topology_available = self._sample is not None and has_admin(status)
            if not self.topology_available:
                self.topology = {}
        self._wake.set()

    def _on_status(self, status: JobStatus) -> None:
        if status.context != self.context:
            return
        try:
            if _resolved(self.session.root) != self._root:
                return  # the same context name in another folder (after %cd)
        except OSError:
            return
        self.show(status)
        self.republish()

    def republish(self, clock: Callable[[], float] = time.monotonic) -> None:
        """The displayed output again, from the current status: the saved copy stays true. Only
        when the status changed, or its "as of" is :data:`REPUBLISH_AFTER` old: every status
        call publishes (a ``%job topology``, the sidebar's Refresh), and each update is an IOPub
        message in the running cell."""
        if self._publish is None:
            return
        key = asdict(self.status)
        now = clock()
        if key == self._published and now - self._published_at < REPUBLISH_AFTER:
            return
        self._published, self._published_at = key, now
        self._publish(self.static_bundle(), self.display_id)

    def static_bundle(self) -> dict[str, object]:
        """The one output of this widget (``formatting.job_bundle``), as of now."""
        return formatting.job_bundle(self.status, self.model_id)

    def _say(self, text: str, error: bool = False) -> None:
        with self.hold_sync():
            self.message = text
            self.message_error = error

    # ── actions (a front end's message, or press() from Python) ──
    def press(self, action_id: str) -> None:
        """Run the action ``action_id`` as its button does (after its confirmation)."""
        handler = self.handlers.get(action_id)
        if handler is None:
            self._say(f"no action {action_id!r}", error=True)
            return
        handler()

    def _on_refresh(self) -> None:
        try:
            self.show(self.session.status(self.context))  # published: _on_status republishes
            self._say("")
        except MonarchJupyterError as error:
            self._say(str(error), error=True)

    def _on_kill(self) -> None:
        self._busily("killing…", lambda: formatting.kill_line(self.session.kill(self.context)))

    def _on_apply(self) -> None:
        """Apply as a bare ``%job apply`` does (the saved spec), or DEFAULT_SPEC where none was."""
        from ..jobs.specs.parse import parse_apply

        if self.context != self.session.status().context:
            self._say(f"switch to context '{self.context}' first (%job context {self.context})", error=True)
            return
        spec = None if self.status.spec else parse_apply(DEFAULT_SPEC)
        self._busily("applying…", lambda: formatting.apply_line(self.session.apply(spec)))

    def _busily(self, doing: str, act: Callable[[], str]) -> None:
        """Run ``act`` with the buttons disabled and ``doing`` said; then say its line, or its
        error's, with the status as it is then."""
        self._busy = True
        self.show(self.status)
        self._say(doing)
        try:
            line = act()
        except MonarchJupyterError as error:
            with contextlib.suppress(MonarchJupyterError):
                self.show(self.session.status(self.context))
            self._say(str(error), error=True)
        else:
            self._say(line)
        finally:
            self._busy = False
            self.show(self.status)

    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        if content.get("kind") == "action":
            self.press(str(content.get("id", "")))
        elif content.get("kind") == "watch":
            self.watch(str(content.get("view", "")), bool(content.get("on")))

    # ── topology: sampled only while watched ──
    def watch(self, view: str, on: bool) -> None:
        """A view came on screen (``on``) or left it; the sampler runs while any view is on."""
        if on:
            self._watchers[view] = time.monotonic() + WATCH_TTL
        else:
            self._watchers.pop(view, None)
        self._wake.set()
        if self._watchers and (self._poller is None or not self._poller.is_alive()):
            self._poller = threading.Thread(target=self._poll, name="monarch-jupyter-topology", daemon=True)
            self._poller.start()

    @property
    def watched(self) -> bool:
        now = time.monotonic()
        for view in [view for view, until in self._watchers.items() if until < now]:
            self._watchers.pop(view, None)
        return bool(self._watchers) and self._unsubscribe is not None

    def refresh_topology(self) -> topo.Topology | None:
        """One sample now (None when the job has no admin); its error is shown, not raised."""
        if self._sample is None or not has_admin(self.status):
            return None
        try:
            sample = self._sample(dict(self.status.urls), self._last)
        except MonarchJupyterError as error:
            sample = topo.Topology(error=str(error))
        else:
            self._last = sample
        self.topology = topo.to_data(sample)
        return sample

    def _poll(self) -> None:
        while self.watched:
            spent = 0.0
            if self.topology_available:
                began = time.monotonic()
                self.refresh_topology()
                spent = time.monotonic() - began
            self._wake.clear()
            self._wake.wait(max(self._interval, spent / TOPOLOGY_DUTY))

    # ── lifetime / display ──
    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._watchers.clear()
        self._wake.set()
        super().close()

    def _repr_mimebundle_(self, **_kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.static_bundle(), {}


def _resolved(path: Path) -> Path:
    return Path(path).resolve()
