"""The plain-data model of one ``%%remote`` run, updated by events.

No Monarch, no IPython, no threads: the runner produces events, the magic
applies them on the kernel thread (:meth:`RunState.apply`) and views read the
state: the text renderer (``render.py``), the saved output (:meth:`RunState.to_mime`)
and the live grid (``widgets/run.py``, an observer). Every fact about a run —
statuses, the end-of-run rules, tails, counts, failing ranks, summaries — lives
here once. Statuses come from ``monarch_jupyter/schema/remote-run.schema.json``.

Memory is bounded whatever a rank prints: a line longer than
:data:`~.lines.LINE_CHARS` is cut (its length is still reported), an unfinished line
keeps only what could be shown, and each rank's tail is bounded in lines and characters
(:mod:`.lines`). The run log (``spool.py``) has every byte. ``--save``'s per-rank results
are :mod:`.results`.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypedDict

from ...schema import FAILING_STATUSES, FINAL_STATUSES, MIME_TYPE, VERSION
from ...schema import STATUSES as ALL_STATUSES
from ...schema import status as _status
from ...text import timefmt as _timefmt
from ...text.rank_sets import rank_set
from ...text.terminal import html_text
from .events import Event as Event
from .events import Exited as Exited
from .events import Finished as Finished
from .events import Lost as Lost
from .events import Output as Output
from .events import Silent as Silent
from .events import Started as Started
from .events import Stopping as Stopping
from .lines import LINE_CHARS, TAIL_LINES, Fed, Tail, last_segment, shown

OUT, ERR = "out", "err"

RUNNING = _status("running")
OK = _status("ok")
FAILED = _status("failed")
TIMED_OUT = _status("timed_out")
SKIPPED = _status("skipped")
INTERRUPTED = _status("interrupted")
PENDING = _status("pending")
STATUSES = FINAL_STATUSES  # what a rank ends as: the keys of the payload's summary
FAILING = frozenset(FAILING_STATUSES)
PAYLOAD_LINES = 12_800  # lines in the saved payload, all ranks together (≈ 1 MB; 200 each up to 64 ranks) …
PAYLOAD_MIN_LINES = 2  # … but at least this many per rank
HTML_RANKS = 64  # ranks in the saved text/html table (failing ones first)
RUN_TAIL_LINES = 12_800  # lines kept in memory for the whole run: TAIL_LINES each up to 64 ranks …
RUN_TAIL_MIN = 20  # … then fewer each, but at least this many


NUL_SHOWN = "\u2400"  # what a NUL byte of a rank's output is shown (and saved) as


# ── events (what the runner reports): remote/view/events.py ───────────────────


class Observer(Protocol):
    """A view of a run (``RunState.observers``, ``remote.observers``), called on the kernel thread.

    ``on_event`` after every event is applied; the magic also calls ``on_tick(state)``,
    when an observer has it, every few milliseconds between events."""

    def on_event(self, state: RunState, event: Event) -> None: ...


# ── the saved payload (schema/remote-run.schema.json) ───────────────────
class _RankPayload(TypedDict):
    label: str
    mesh: str
    point: dict[str, int]
    rank: int
    status: str
    returncode: int | None
    duration: float | None
    lines: list[list[str]]  # [stream, line]
    truncated: int


class RankPayload(_RankPayload, total=False):
    error: str  # only when there is one


class _PayloadVersion(TypedDict):
    version: int


class _PayloadHead(_PayloadVersion, total=False):
    run_id: str  # only when the run is in the runs index
    detached: bool  # only in a detached run's running payload (True)
    model_id: str  # only in a running payload shown with a live grid (its widget model)
    streamed: bool  # only in a finished payload whose lines the cell streamed above it (True)
    own_cell: bool  # only in the result the running cell shows under its own input (True)


class _Payload(TypedDict):
    state: str  # "running" or "finished"
    command: str
    mode: str
    target: str
    started: str  # ISO 8601, UTC
    duration: float | None
    log_path: str | None
    summary: dict[str, int]
    ranks: list[RankPayload]


class Payload(_PayloadHead, _Payload):
    """The ``application/vnd.monarch.remote+json`` payload a cell saves."""


# ── per-rank state ─────────────────────────────────────────────────────
@dataclass
class RankState:
    label: str
    mesh: str
    point: dict[str, int]
    rank: int
    status: str = PENDING
    returncode: int | None = None
    duration: float | None = None
    pid: int | None = None
    error: str | None = None
    value: str | None = None  # a session cell's last expression, as repr shows it
    started: float | None = None  # wall clock (epoch seconds) of its first sign of life
    quiet_since: float | None = None  # wall clock of its last output, while it is quiet (quiet.py)
    lines: Tail = field(default_factory=Tail)
    counts: dict[str, int] = field(default_factory=lambda: {OUT: 0, ERR: 0})
    nbytes: int = 0
    # the unfinished line per stream: its last segment (\r), at most LINE_CHARS of it
    pending: dict[str, str] = field(default_factory=lambda: {OUT: "", ERR: ""})
    dropped: dict[str, int] = field(default_factory=lambda: {OUT: 0, ERR: 0})  # characters of it not kept
    # whether the unfinished line was rewritten by a \r (a progress bar): views update it in place
    rewound: dict[str, bool] = field(default_factory=lambda: {OUT: False, ERR: False})
    full: dict[str, list[str]] | None = None  # whole text per stream, when kept (--save)
    full_limit: int = 64 << 20

    @property
    def done(self) -> bool:
        return self.status not in (PENDING, RUNNING)

    @property
    def failing(self) -> bool:
        return self.status in FAILING

    @property
    def total_lines(self) -> int:
        return self.counts[OUT] + self.counts[ERR]

    @property
    def truncated(self) -> int:
        """Lines counted but no longer in the tail."""
        return max(0, self.total_lines - len(self.lines))

    def partial(self, stream: str) -> str:
        """The unfinished line of ``stream`` as a terminal shows it now ('' if none)."""
        return shown(self.pending[stream], self.dropped[stream]) if self.pending[stream] else ""

    def feed(self, stream: str, text: str, index: int = 0, newlines: int | None = None) -> Fed | None:
        """Add a decoded chunk; returns its complete lines (None when it completed none).

        ``newlines``: ``text.count("\\n")`` if known (the actor counts them as it reads).
        """
        self.nbytes += len(text)
        if self.full is not None and self.nbytes <= self.full_limit:
            self.full[stream].append(text)
        cut = text.rfind("\n")
        if cut < 0:
            self._grow(stream, text)
            return None
        prefix, dropped = self.pending[stream], self.dropped[stream]
        self.pending[stream], self.dropped[stream], self.rewound[stream] = "", 0, False
        if cut + 1 < len(text):
            self._grow(stream, text[cut + 1 :])
        # the pending part has no newline: the lines completed are the newlines of text
        fed = Fed(
            index, stream, prefix, text, cut, newlines if newlines else text.count("\n", 0, cut) + 1, dropped
        )
        self.counts[stream] += fed.count
        self.lines.extend(stream, fed.last(self.lines.max_lines))
        return fed

    def _grow(self, stream: str, text: str) -> None:
        """Append ``text`` (no newline) to the unfinished line, keeping only what can be shown:
        the last ``\\r`` segment, cut to LINE_CHARS (a 50 MB line costs 2 KB, not 50 MB)."""
        line = self.pending[stream] + text
        if "\r" in line:
            self.rewound[stream] = True
            start, _ = last_segment(line)
            if start:  # a new segment replaces what came before, dropped characters included
                line = line[start:]
                self.dropped[stream] = 0
        if len(line) > LINE_CHARS:
            body = line.rstrip("\r")  # a trailing \r must survive: what follows replaces the line
            if len(body) > LINE_CHARS:
                self.dropped[stream] += len(body) - LINE_CHARS
                line = body[:LINE_CHARS] + ("\r" if len(body) < len(line) else "")
        self.pending[stream] = line

    def close_pending(self, index: int = 0) -> list[Fed]:
        """End of output: a last line without newline becomes a line."""
        closed = []
        for stream in (OUT, ERR):
            rest, dropped = self.pending[stream], self.dropped[stream]
            self.rewound[stream] = False
            if rest:
                self.pending[stream], self.dropped[stream] = "", 0
                self.counts[stream] += 1
                self.lines.extend(stream, [shown(rest, dropped)])
                closed.append(Fed(index, stream, "", rest, len(rest), 1, dropped))
        return closed

    def text(self, stream: str) -> str:
        """The whole text of ``stream`` (only when kept for --save)."""
        if self.full is None:
            return ""
        return "".join(self.full[stream])

    def describe(self) -> str:
        """``hosts=1 (rc 3)`` style, for summaries and errors."""
        if self.status == OK or (self.status == FAILED and self.error is None):
            return f"{self.label} (rc {self.returncode})"
        if self.error:
            return f"{self.label} ({self.error})"
        if self.returncode is not None:
            return f"{self.label} ({self.status.replace('_', ' ')}, rc {self.returncode})"
        return f"{self.label} ({self.status.replace('_', ' ')})"


# ── the run ────────────────────────────────────────────────────────────
@dataclass
class RunState:
    command: str
    mode: str
    target: str
    ranks: list[RankState]
    started: float  # time.time()
    log_path: str | None = None
    duration: float | None = None
    stopping: str | None = None  # "interrupted" / "timed_out" once stopping
    error: str | None = None
    finished: bool = False
    observers: list[Observer] = field(default_factory=list)
    clock: Callable[[], float] = time.time  # wall clock, for durations and rank start times
    run_id: str | None = None  # the runs index id (``%remote attach <run_id>``)
    unfinished: list[str] = field(default_factory=list)  # ranks still running when it was stopped
    silences: list[str] = field(default_factory=list)  # the drive's "silent for" lines, oldest first
    rewrites: int = 0  # outputs that rewrote a rank's unfinished line with \r (progress bars): views poll it
    stopped_by: str | None = None  # who stopped it, when a host said (e.g. "%job kill (kernel pid 42)")
    # bumped by every event that may change a rank's status, return code, duration or error
    # (all but a running rank's output): a view of N ranks re-reads them only when it moved
    version: int = 0
    # the lines the event being applied completed, for observers (the grid's grouped tiles)
    last_fed: list[Fed] = field(default_factory=list)

    def __post_init__(self) -> None:
        keep = max(RUN_TAIL_MIN, min(TAIL_LINES, RUN_TAIL_LINES // max(1, len(self.ranks))))
        for rank in self.ranks:
            rank.lines.max_lines = min(rank.lines.max_lines, keep)

    def apply(self, event: Event) -> list[Fed]:
        """Update from one event and notify observers; returns the lines it completed."""
        # an Output (most events) has no other case to test
        fed = self._on_output(event) if type(event) is Output else self._on_other(event)
        self.last_fed = fed
        for observer in list(self.observers):
            observer.on_event(self, event)
        return fed

    def _on_other(self, event: Event) -> list[Fed]:
        self.version += 1
        fed: list[Fed] = []
        if isinstance(event, Started):
            self._on_started(event)
        elif isinstance(event, Exited):
            fed = self._on_exited(event)
        elif isinstance(event, Lost):
            fed = self._on_lost(event)
        elif isinstance(event, Silent):
            self.silences.append(event.line)
        elif isinstance(event, Stopping):
            self.stopping = self.stopping or event.reason
            self.unfinished = self.unfinished or self._running_now()
        elif isinstance(event, Finished):
            fed = self._on_finished(event)
        return fed

    def _on_output(self, event: Output) -> list[Fed]:
        rank = self.ranks[event.index]
        if rank.status == PENDING:
            self._start(rank)
        text = event.text
        if "\0" in text:  # a NUL would be saved into the notebook (its JSON as \u0000): shown as ␀
            text = text.replace("\0", NUL_SHOWN)
        was = rank.rewound[event.stream]
        item = rank.feed(event.stream, text, event.index, event.newlines)
        if was or rank.rewound[event.stream]:  # a bar moved, or ended
            self.rewrites += 1
        return [] if item is None else [item]

    def _on_started(self, event: Started) -> None:
        rank = self.ranks[event.index]
        rank.pid = event.pid
        if rank.status == PENDING:
            self._start(rank)

    def _on_exited(self, event: Exited) -> list[Fed]:
        rank = self.ranks[event.index]
        if rank.done:
            return []
        fed = rank.close_pending(event.index)
        rank.returncode = event.returncode
        rank.duration = event.duration
        rank.error = event.error
        rank.value = event.value
        self.stopped_by = self.stopped_by or event.stopped_by
        stopped = self.stopping or (INTERRUPTED if self.stopped_by else None)
        if stopped and (event.returncode is None or event.returncode != 0):
            rank.status = stopped  # stopped (by whom: summary_line), not failed
        else:
            rank.status = OK if event.returncode == 0 and not event.error else FAILED
        return fed

    def _on_lost(self, event: Lost) -> list[Fed]:
        rank = self.ranks[event.index]
        if rank.done:
            return []
        fed = rank.close_pending(event.index)
        rank.status = FAILED
        rank.error = event.message
        return fed

    def _on_finished(self, event: Finished) -> list[Fed]:
        self.finished = True
        self.error = self.error or event.error
        if self.duration is None:
            self.duration = max(0.0, self.clock() - self.started)
        fed: list[Fed] = []
        for index, rank in enumerate(self.ranks):
            if not rank.done:  # the end-of-run rule: never heard of, or never reported its end
                fed.extend(rank.close_pending(index))
                if rank.status == PENDING and self.stopping is None:
                    rank.status = SKIPPED
                else:
                    rank.status = self.stopping or FAILED
                    rank.error = rank.error or event.error
        return fed

    def _running_now(self) -> list[str]:
        """The ranks not done, a quiet one with its silence: ``hosts=7 (quiet 42 s)``."""
        now = self.clock()
        return [
            r.label + ("" if r.quiet_since is None else f" (quiet {now - r.quiet_since:.0f} s)")
            for r in self.ranks
            if not r.done
        ]

    def _start(self, rank: RankState) -> None:
        self.version += 1
        rank.status = RUNNING
        rank.started = self.clock()

    # ── reading ──
    def counts(self) -> dict[str, int]:
        """Ranks per final status (the payload's summary)."""
        summary = {status: 0 for status in STATUSES}
        for rank in self.ranks:
            if rank.status in summary:
                summary[rank.status] += 1
        return summary

    def failing(self) -> list[RankState]:
        return [r for r in self.ranks if r.failing]

    def progress_line(self) -> str:
        """``64 ranks: 60 ok, 2 failed, 2 running`` while it runs; :meth:`summary_line` once finished."""
        if self.finished:
            return self.summary_line()
        counts = {status: 0 for status in ALL_STATUSES}
        for rank in self.ranks:
            counts[rank.status] = counts.get(rank.status, 0) + 1
        parts = [f"{n} {status.replace('_', ' ')}" for status, n in counts.items() if n]
        head = f"{len(self.ranks)} rank{'s' if len(self.ranks) != 1 else ''}"
        text = f"{head}: {', '.join(parts)}" if parts else head
        if self.stopping:
            text += f" · stopping ({self.stopping.replace('_', ' ')})"
        return text

    def summary_line(self) -> str:
        """``remote: 2 ok, 1 failed [hosts=1 (rc 3)] · 0.42 s · log .monarch/…``"""
        parts = []
        ok = [r for r in self.ranks if r.status == OK]
        parts.append(f"{len(ok)} ok" + (" (rc 0)" if ok else ""))
        for status in (s for s in ALL_STATUSES if s in STATUSES and s != OK):  # failed, timed out, …
            members = [r for r in self.ranks if r.status == status]
            if members or status == FAILED:
                text = f"{len(members)} {status.replace('_', ' ')}"
                if members and status != SKIPPED:
                    text += ": " + _list(_fold_described(members))
                parts.append(text)
        duration = _timefmt.seconds(self.duration) if self.duration is not None else "running"
        line = f"remote {self.target}: " + ", ".join(parts) + f" · {duration}"
        if self.stopped_by:
            line += f" · stopped by {self.stopped_by}"
        # the stopped ranks' status says they never finished: said again only with news (quiet)
        stopped = {r.label for r in self.ranks if r.status in (INTERRUPTED, TIMED_OUT)}
        if self.unfinished and not set(self.unfinished) <= stopped:
            line += " · never finished: " + _list(self.unfinished)
        if self.log_path:
            line += f" · log {self.log_path}"
        said = {status.replace("_", " ") for status in (INTERRUPTED, TIMED_OUT)} if stopped else set()
        if self.error and self.error not in said and not any(r.error == self.error for r in self.ranks):
            line += f" · {self.error}"
        return line

    def failure_message(self) -> str | None:
        """One line naming the failing ranks, or None when every rank succeeded."""
        bad = self.failing()
        if not bad and not self.error:
            return None
        if not bad:
            return f"%%remote: {self.error}"
        return f"%%remote: {len(bad)} of {len(self.ranks)} ranks did not succeed: " + _list(
            _fold_described(bad)
        )

    def to_mime(self, lines: bool = True) -> Payload:
        """The ``application/vnd.monarch.remote+json`` payload (``schema/remote-run.schema.json``);
        without ``lines``, every rank's tail is left out (counted in ``truncated``)."""
        head: _PayloadHead = {"version": VERSION}
        # the saved payload is bounded: past PAYLOAD_LINES // ranks lines each, the tails are
        # shorter (``truncated`` counts the rest; the log has every line)
        per_rank = max(PAYLOAD_MIN_LINES, PAYLOAD_LINES // max(1, len(self.ranks))) if lines else 0
        if self.run_id:
            head["run_id"] = self.run_id
        return {
            **head,
            "state": "finished" if self.finished else "running",
            "command": self.command,
            "mode": self.mode,
            "target": self.target,
            "started": _timefmt.utc_iso(self.started),
            "duration": round(self.duration, 3) if self.duration is not None else None,
            "log_path": self.log_path,
            "summary": self.counts(),
            "ranks": [_rank_payload(r, per_rank) for r in self.ranks],
        }

    def to_html(self, summary: str | None = None, lines: bool = True) -> str:
        """The self-contained HTML copy: a summary line and one row per rank (failing ranks
        first past HTML_RANKS), failures coloured, stderr lines marked; without ``lines`` (they
        were streamed above it) no "last lines" column."""
        rows = []
        ranks = self.ranks
        if len(ranks) > HTML_RANKS:  # failing ranks first; a row then says how many are left out
            ranks = sorted(ranks, key=lambda r: not r.failing)[:HTML_RANKS]
        for r in ranks:
            tail = (
                "<td style='text-align:left'><pre style='margin:0'>"
                + "\n".join(_html_line(stream, line) for stream, line in r.lines.last(5))
                + "</pre></td>"
                if lines
                else ""
            )
            status = html.escape(r.status.replace("_", " "))
            if r.failing:  # coloured and named: the colour is not the only sign
                status = f"<b style='color:{FAILED_COLOUR}'>{status}</b>"
            rows.append(
                "<tr>"
                f"<td><code>{html.escape(r.label)}</code></td>"
                f"<td>{status}</td>"
                f"<td>{'' if r.returncode is None else r.returncode}</td>"
                f"<td>{'' if r.duration is None else _timefmt.seconds(r.duration)}</td>"
                f"<td>{r.total_lines}</td>"
                f"{tail}"
                "</tr>"
            )
        columns = 6 if lines else 5
        if len(self.ranks) > HTML_RANKS:
            rows.append(f"<tr><td colspan='{columns}'>… {len(self.ranks) - HTML_RANKS} more ranks</td></tr>")
        last = "<th>last lines</th>" if lines else ""
        return (
            f"<div class='monarch-remote'><div>{html.escape(summary or self.summary_line())}</div>"
            "<table style='margin-left:0'><thead><tr><th>rank</th><th>status</th><th>rc</th><th>time</th>"
            f"<th>lines</th>{last}</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>"
        )

    def mime_bundle(self, lines: bool = True, own_cell: bool = False) -> dict[str, object]:
        """The run's result output; without ``lines`` (the cell streamed them above it) neither
        the payload nor the HTML repeats them (``streamed: true``); ``own_cell``: it stands under
        the cell that ran it, whose input is the command (views do not repeat it)."""
        summary = self.summary_line()
        payload = self.to_mime(lines=lines)
        if not lines:
            payload["streamed"] = True
        if own_cell:
            payload["own_cell"] = True
        return {MIME_TYPE: payload, "text/plain": summary, "text/html": self.to_html(summary, lines)}

    def attach_line(self) -> str:
        return f"%remote attach {self.run_id}" if self.run_id else "%remote attach"

    def running_bundle(self, detached: bool = False, model_id: str | None = None) -> dict[str, object]:
        """What stands in the cell while the run goes on (payload ``state: running``): saved
        mid-run and reopened, it says the run was still going and how to follow it. A detached
        run's stays when the run ends (no cell is there to replace it), so it says only that the
        run was started detached (``detached: true``). No text/plain: a terminal prints that at
        once, mid-run, where the note is wrong. No lines: they would be those of the moment it
        was shown, and the front end draws the payload (hidden) beside the live grid: at 4,096
        ranks ~41,000 DOM nodes of nothing to see."""
        payload = self.to_mime(lines=False)
        if model_id:  # the labextension draws this live grid here while its model lives
            payload["model_id"] = model_id
        if detached:
            payload["detached"] = True
            text = f"run {self.run_id or ''} was started detached: {self.attach_line()} shows its output"
        else:
            text = f"run {self.run_id or ''} still running when saved: {self.attach_line()} follows it"
        return {
            MIME_TYPE: payload,
            "text/html": f"<div class='monarch-remote-running'>{html.escape(text)}</div>",
        }


#: "failed" in the HTML copy: the theme's error colour in Lab and nbconvert's page, else 5.2:1 on
#: white (no one colour reads at 4.5:1 on both white and a dark theme's #111)
FAILED_COLOUR = "var(--jp-error-color1, #d1242f)"
#: stderr lines in the HTML copy: the theme's error background and a bar, the text's own colour
#: (its contrast is the theme's)
STDERR_STYLE = (
    "background:var(--jp-rendermime-error-background, #fdd);border-left:2px solid #d1242f;padding-left:4px"
)


def _html_line(stream: str, line: str) -> str:
    """One line of the HTML copy; a stderr line marked as such (style and title)."""
    text = html_text(line)
    if stream == ERR:
        return f"<span class='monarch-stderr' title='stderr' style='{STDERR_STYLE}'>{text}</span>"
    return text


def _rank_payload(r: RankState, max_lines: int = TAIL_LINES) -> RankPayload:
    lines: Tail | list[tuple[str, str]] = []
    if max_lines > 0:
        lines = r.lines if len(r.lines) <= max_lines else r.lines.last(max_lines)
    payload: RankPayload = {
        "label": r.label,
        "mesh": r.mesh,
        "point": dict(r.point),
        "rank": r.rank,
        "status": r.status,
        "returncode": r.returncode,
        "duration": round(r.duration, 3) if r.duration is not None else None,
        "lines": [[stream, line] for stream, line in lines],
        "truncated": max(0, r.total_lines - len(lines)),
    }
    if r.error:
        payload["error"] = r.error
    return payload


def _fold_described(members: list[RankState]) -> list[str]:
    """Each rank's ``describe()``, ranks with the same reason folded into one rank set:
    ``hosts=0,gpus=[0-1]; hosts=1,gpus=[0-1] (KeyboardInterrupt)`` instead of four entries."""
    groups: dict[str, list[RankState]] = {}
    for member in members:
        groups.setdefault(member.describe()[len(member.label) :], []).append(member)
    if all(len(group) == 1 for group in groups.values()):
        return [m.describe() for m in members]
    return [
        (
            group[0].label
            if len(group) == 1
            else rank_set((tuple(m.point.items()) for m in group), brackets=True)
        )
        + reason
        for reason, group in groups.items()
    ]


def _list(items: list[str], limit: int = 8) -> str:
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f", … (+{len(items) - limit})"
