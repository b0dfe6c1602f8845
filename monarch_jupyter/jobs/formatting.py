"""Text and HTML for job statuses: pure functions over plain data."""

from __future__ import annotations

import html
import time

from ..system.procfs import stopped_line
from ..text import timefmt as _timefmt
from .status import NO_JOB, NOT_RUNNING, RUNNING, WORKERS_DEAD, ApplyResult, JobStatus

#: The one table of job-state colours (the badge of the text/html copy and of the widget):
#: white text on each reads in light and dark themes alike.
STATE_COLOURS = {
    RUNNING: "#1a7f37",
    NOT_RUNNING: "#6e7781",
    WORKERS_DEAD: "#cf222e",
    NO_JOB: "#6e7781",
}
UNKNOWN_COLOUR = "#6e7781"


def state_colour(state: str) -> str:
    return STATE_COLOURS.get(state, UNKNOWN_COLOUR)


def short_id(apply_id: str | None) -> str:
    return apply_id[:8] if apply_id else "-"


def meshes_text(status: JobStatus) -> str:
    parts = []
    for mesh in status.meshes:
        hosts = "?" if mesh.hosts is None else str(mesh.hosts)
        text = f"{mesh.name}×{hosts}"
        if mesh.live_workers is not None:
            text += f" ({mesh.live_workers} live)"
        parts.append(text)
    return ", ".join(parts) or "no meshes"


def _applied(status: JobStatus, now: float | None, ages: bool = True) -> str:
    if not status.applied_at:
        return "-"
    if not ages:  # a saved copy: "N ago" would be wrong as soon as it is reopened
        return _timefmt.local_time(status.applied_at)
    now = time.time() if now is None else now
    return f"{_timefmt.local_time(status.applied_at)} ({_timefmt.age(now - status.applied_at)} ago)"


def attach_line(status: JobStatus, now: float | None = None) -> str:
    """The one line ``%load_ext`` prints about the current context."""
    ctx = f"context '{status.context}'"
    if status.state == NO_JOB and status.note:
        return f"monarch_jupyter: no job cached in {ctx}, but {status.note}"
    if status.state == NO_JOB:
        return f"monarch_jupyter: no job in {ctx} yet; %job apply --local hosts=2 starts one"
    what = f"{status.job_class} {short_id(status.apply_id)}"
    if status.attached:
        now = time.time() if now is None else now
        when = f", applied {_timefmt.age(now - status.applied_at)} ago" if status.applied_at else ""
        return (
            f"monarch_jupyter: re-attached to {ctx}: {what}, {meshes_text(status)}, "
            f"apply id {status.apply_id}{when}"
        )
    if status.state == WORKERS_DEAD:
        return (
            f"monarch_jupyter: the cached job of {ctx} ({what}) has lost its workers; "
            "the cache was left as it is: %job apply starts a new job, %job kill clears it"
        )
    return f"monarch_jupyter: the cached job of {ctx} ({what}) is {status.state}; %job apply starts it"


def apply_line(result: ApplyResult) -> str:
    """One line after ``%job apply``."""
    status = result.status
    head = f"context '{status.context}': {status.job_class} {meshes_text(status)}, apply id {status.apply_id}"
    if not result.changed:
        line = f"already running, nothing applied: {head}"
    elif result.replaced_apply_id:
        line = f"applied (replaced {short_id(result.replaced_apply_id)}): {head}"
    else:
        line = f"applied: {head}"
    if result.note:
        line += f"\nnote: {result.note}"
    return line


def kill_line(status: JobStatus) -> str:
    if status.note and status.job_class is None:  # nothing was killed: say what was done
        return f"context '{status.context}': {status.note}"
    return (
        f"killed the job of context '{status.context}' ({status.job_class} "
        f"{short_id(status.apply_id)}, {meshes_text(status)}); state file removed"
    )


def _rows(status: JobStatus, now: float | None, ages: bool = True) -> list[tuple[str, str]]:
    rows = [("state", status.state)]
    if status.state != NO_JOB:
        rows += [
            ("class", status.job_class or "-"),
            ("apply id", status.apply_id or "-"),
            ("applied", _applied(status, now, ages)),
        ]
    rows.append(("spec", status.spec or "-"))
    if status.cache_path:
        rows.append(("cache", status.cache_path))
    if status.note:
        rows.append(("note", status.note))
    if status.services:
        rows.append(("services", ", ".join(status.services)))
    rows += [("mount", line) for line in status.mounts]
    if status.reach and status.state != NO_JOB:
        rows.append(("reach", status.reach))
    for key, url in status.urls.items():
        if url:
            rows.append((key, url))
    return rows


def status_text(status: JobStatus, now: float | None = None, as_of: float | None = None) -> str:
    """The plain-text ``%job status`` block; with ``as_of`` (epoch seconds) a saved copy's: no
    "N ago", and a last line saying when it was last true."""
    lines = [f"Monarch job, context '{status.context}'"]
    lines += [f"  {key:<9} {value}" for key, value in _rows(status, now, as_of is None)]
    for mesh in status.meshes:
        hosts = "?" if mesh.hosts is None else mesh.hosts
        live = "?" if mesh.live_workers is None else mesh.live_workers
        lines.append(f"  mesh      {mesh.name}: {hosts} hosts, {live} live workers")
    for name, pid in sorted(status.stopped_workers.items()):
        lines.append(f"  stopped   {stopped_line(name, pid)}")
    if status.state == WORKERS_DEAD:
        lines.append("  hint      %job apply starts a new job; %job kill clears the cache")
    elif status.state == NO_JOB:
        lines.append("  hint      %job apply --local hosts=2 starts a local job")
    if as_of is not None:
        lines.append(f"  {AS_OF_KEY:<9} {as_of_text(as_of)}")
    return "\n".join(lines)


#: the row of a saved copy that says when it was last true
AS_OF_KEY = "as of"


def as_of_text(as_of: float) -> str:
    """When a saved copy was last true: the kernel updates it (by display id) while it runs, so
    a copy reopened after the kernel stopped shows the last state it knew, and this time."""
    return f"{_timefmt.local_time(as_of)} (updated while its kernel ran)"


def status_html(status: JobStatus, now: float | None = None, as_of: float | None = None) -> str:
    """The same block as a small HTML table with a coloured state badge (``as_of``: as in
    :func:`status_text`)."""
    esc = html.escape
    colour = state_colour(status.state)
    badge = (
        f'<span style="background:{colour};color:#fff;border-radius:8px;padding:1px 8px">'
        f"{esc(status.state)}</span>"
    )
    rows = []
    listed = _rows(status, now, as_of is None)
    if as_of is not None:
        listed.append((AS_OF_KEY, as_of_text(as_of)))
    for key, value in listed:
        cell = badge if key == "state" else esc(value)
        if key in status.urls and value.startswith(("http://", "https://")):
            cell = f'<a href="{esc(value)}" target="_blank">{esc(value)}</a>'
        rows.append(
            f"<tr><th style='text-align:left'>{esc(key)}</th><td style='text-align:left'>{cell}</td></tr>"
        )
    mesh_rows = "".join(
        f"<tr><td>{esc(m.name)}</td><td>{'?' if m.hosts is None else m.hosts}</td>"
        f"<td>{'?' if m.live_workers is None else m.live_workers}</td></tr>"
        for m in status.meshes
    )
    meshes = (
        f"<table{_LEFT}><tr><th>mesh</th><th>hosts</th><th>live workers</th></tr>" + mesh_rows + "</table>"
        if mesh_rows
        else ""
    )
    return (
        f"<div class='monarch-job'><b>Monarch job</b>, context <code>{esc(status.context)}</code>"
        f"<table{_LEFT}>{''.join(rows)}</table>{meshes}</div>"
    )


# at the output's left edge: JupyterLab's rendered HTML centres tables
_LEFT = " style='margin-left:0'"


def created_context_line(name: str, others: list[str]) -> str:
    """``%job context use NAME`` of a context that did not exist (the CLI creates it too)."""
    listed = f"contexts: {', '.join(others)}" if others else "no other context"
    return f"created context '{name}' (no job yet; {listed})"


def contexts_text(infos: list) -> str:
    """``%job context ls``: one line per context, active one starred."""
    if not infos:
        return "no contexts yet: %job apply creates 'default', %job context create NAME adds one"
    lines = []
    for info in infos:
        status = info.status or {}
        state = status.get("state") or ("cached" if info.has_state else "no job")
        if not info.has_state and state != "no job":
            state = "no job"
        meshes = ", ".join(f"{m['name']}×{m['hosts']}" for m in status.get("meshes", []) if info.has_state)
        extra = f"  {meshes}" if meshes else ""
        lines.append(f"{'*' if info.active else ' '} {info.name:<16} {state}{extra}")
    return "\n".join(lines)


class StatusView:
    """Displayable status: text/plain and text/html."""

    def __init__(self, status: JobStatus) -> None:
        self.status = status

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/plain": status_text(self.status), "text/html": status_html(self.status)}

    def __repr__(self) -> str:
        return status_text(self.status)


#: Marks the ``%job`` widget's output: the labextension draws the live widget from it, or the
#: output's own HTML where the widget's model is gone (a notebook reopened without its kernel).
JOB_MIME = "application/vnd.monarch.job+json"


def job_bundle(
    status: JobStatus, model_id: str | None = None, as_of: float | None = None
) -> dict[str, object]:
    """The ``%job`` output, static first: the text for text front ends, the self-contained HTML
    for every other (exports, viewers, a Lab without our labextension), and our payload, from
    which the labextension draws the live widget of ``model_id`` while its model lives. No
    widget view: a saved one outranks the HTML and shows "model not found" once the kernel is
    gone. ``as_of`` (default: now) says when the copy was last true."""
    as_of = time.time() if as_of is None else as_of
    payload: dict[str, object] = {"version": 1, "context": status.context, "state": status.state}
    payload["as_of"] = _timefmt.utc_iso(as_of)
    if model_id:
        payload["model_id"] = model_id
    return {
        "text/plain": status_text(status, as_of=as_of),
        "text/html": status_html(status, as_of=as_of),
        JOB_MIME: payload,
    }
