"""Turn run updates into a few labelled cell writes (pure: no IPython, no threads).

The magic feeds :class:`TextRenderer` the lines :meth:`RunState.apply` completed
and asks it for text every few milliseconds; it answers at most 20 times in any
second, and each answer is one write to the cell (one IOPub message). Budgets keep the cell bounded whatever
the number of ranks or the line rate: per write, per rank, and for the whole
run per rank (after which only the end-of-run tail is shown; the log has all).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...text.rank_sets import rank_set
from .lines import Fed
from .livefold import LiveFold
from .model import ERR, OUT, RankState, RunState
from .quiet import QuietWatch
from .tbfold import TracebackFold

# A token bucket: a line right after another is not held back (BURST writes back to
# back), yet no 1 s window ever sees more than MAX_RATE + BURST = 19 writes, 20 with the
# run's last write (finish), which is not held back (64 ranks once showed 21 at 17 + 3).
MAX_RATE = 16.0  # sustained cell writes per second
BURST = 3
WRITE_LINES = 1000  # lines per write, shared by the ranks that have output
WRITE_CHARS = 48_000  # characters per write (Jupyter server drops IOPub data above 1 MB/s)
LIVE_LINES = 1000  # lines per rank shown live; then only the final tail
SHOW_RANKS = 24  # ranks whose lines one write shows (stderr first, then in turn); the others are
#                  folded into one line: the cell is a view, never every rank's tail at once
FINAL_TAIL = 10  # lines per capped rank shown at the end
PARTIAL_AFTER = 0.2  # a line still unfinished after this long is shown as it stands (prompts,
#                      \r progress bars); lines split by chunking complete well before
PARTIAL_EVERY = 1.0  # a changing unfinished line (a prompt) is re-shown at most this often
PROGRESS_EVERY = 0.25  # the progress lines (\r-rewritten: tqdm, Keras) are updated in place at
#                        most this often: one message however many ranks draw a bar


def prefix(label: str, stream: str, width: int = 0) -> str:
    """``[hosts=0]`` for stdout, ``[hosts=0:err]`` for stderr, padded to ``width``."""
    tag = f"[{label}]" if stream == OUT else f"[{label}:err]"
    return tag.ljust(width) + " "


@dataclass
class _Rank:
    shown: int = 0  # lines shown live so far
    capped: bool = False
    partial: dict[str, str] = field(default_factory=lambda: {OUT: "", ERR: ""})  # last shown unfinished line
    # when it was first seen unfinished
    since: dict[str, float | None] = field(default_factory=lambda: {OUT: None, ERR: None})
    partial_at: float = -1e9


class TextRenderer:
    """Coalesces completed lines into at most ``max_rate`` writes a second."""

    def __init__(
        self,
        state: RunState,
        live: bool = True,
        max_rate: float = MAX_RATE,
        write_lines: int = WRITE_LINES,
        live_lines: int = LIVE_LINES,
        quiet: QuietWatch | None = None,
        fold: bool = False,
        progress: bool = False,
        tracebacks: bool = False,
    ) -> None:
        """``progress``: \r-rewritten lines are kept for :meth:`take_progress` (a view that
        updates them in place), not written to the stream as they stand. ``tracebacks``:
        identical tracebacks of several ranks shown once, under their rank set (:mod:`.tbfold`)."""
        self.state = state
        self.in_place = progress
        self.tracebacks = TracebackFold() if tracebacks and not fold else None
        self.fold = LiveFold(state.ranks) if fold else None  # --group: identical ranks' lines once
        self._now: float | None = None  # the caller's last time (the fold's clock between flushes)
        self.quiet = quiet  # flags quiet ranks (a run's cell; not actors' output)
        self._notes: list[str] = []  # quiet-rank and silent-rank lines not written yet
        self._silences = 0  # how many of the state's silence lines were taken into _notes
        self.live = live
        self.rate = max_rate
        self.burst = float(BURST)
        self._tokens = float(BURST)
        self._filled: float | None = None  # time of the last refill
        self.write_lines = write_lines
        self.live_lines = live_lines
        self._queue: list[tuple[Fed, bool]] = []  # (lines, first line already shown as a partial)
        self._ranks = [_Rank() for _ in state.ranks]
        self.writes = 0
        self._turn = 0  # the rank index the next folded write starts from
        self.width = max((len(r.label) + 2 for r in state.ranks), default=0)
        # (rank, stream) -> its \r-rewritten unfinished line as shown in place, not in the stream
        self._progress: dict[tuple[int, str], str] = {}
        self._progress_changed = False
        self._progress_at = -1e9

    # ── input ──
    def add(self, fed: list[Fed], only_missing: bool = False) -> None:
        """Queue completed lines; ``only_missing``: those not queued yet (an add cut short)."""
        if not self.live:
            return
        if self.fold is not None:
            self.fold.add(fed, self._now)
            return
        queued = {id(item) for item, _ in self._queue} if only_missing else ()
        for item in fed:
            if id(item) in queued:
                continue
            view = self._ranks[item.index]
            if self._progress.pop((item.index, item.stream), None) is not None:
                self._progress_changed = True  # its final line goes to the stream, once
            shown = view.partial[item.stream]
            view.partial[item.stream] = ""
            view.since[item.stream] = None
            if view.capped:
                continue
            if self.tracebacks is not None and item.stream == ERR:
                held = self._held(item)
                if held is None:
                    continue
                item = held
            # a line shown while unfinished is not repeated when its newline comes
            seen = bool(shown) and item.first() == shown
            self._queue.append((item, seen))

    def _held(self, item: Fed) -> Fed | None:
        """``item``'s lines but those a traceback fold holds (None: all held)."""
        assert self.tracebacks is not None
        if item.count > WRITE_LINES or not self.tracebacks.wants(item.index, item.prefix + item.text):
            return item  # a flood is no traceback to fold; most chunks have none
        lines = self.tracebacks.feed(item.index, item.last(item.count), self._now)
        if not lines:
            return None
        text = "\n".join(lines) + "\n"
        return Fed(item.index, item.stream, "", text, len(text) - 1, len(lines))

    # ── output ──
    def _refill(self, now: float) -> None:
        if self._filled is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._filled) * self.rate)
        self._filled = now

    def due(self, now: float) -> bool:
        self._refill(now)
        return self._tokens >= 1.0

    def flush(self, now: float, force: bool = False) -> str:
        """Text for one cell write ('' if nothing to show or too soon)."""
        return "".join(text for _, text in self.flush_streams(now, force))

    def flush_streams(self, now: float, force: bool = False) -> list[tuple[str, str]]:
        """:meth:`flush` as ``(stream, text)`` parts in order: a rank's stderr lines are ERR
        parts (for the cell's stderr, which front ends colour), everything else OUT."""
        note = "" if self.quiet is None or self.state.finished else self.quiet.check(self.state.clock())
        if note and self.live:
            self._notes.append(note)
        if len(self.state.silences) > self._silences:
            if self.live:
                self._notes.extend(line + "\n" for line in self.state.silences[self._silences :])
            self._silences = len(self.state.silences)
        if not force:  # (finish's 0.0 is not a time)
            self._now = now  # lines fed before the next call arrived about now
        if not self.live or (not force and not self.due(now)):
            return []
        out: list[tuple[str, str]] = [(OUT, note) for note in self._notes]
        self._notes = []
        if self.fold is not None:
            return self._folded(now, out, force)
        return self._plain(now, out, force)

    def _plain(self, now: float, out: list[tuple[str, str]], force: bool = False) -> list[tuple[str, str]]:
        """One write of the plain live view: each rank's queued lines within its budgets."""
        queue, self._queue = self._queue, []
        active = {item.index for item, _ in queue}
        if len(active) > SHOW_RANKS:
            queue, active, fold = self._fold(queue, active)
        else:
            fold = ""
        budget = max(20, self.write_lines // max(1, len(active)))
        chars = max(2000, WRITE_CHARS // max(1, len(active)))
        left = {index: budget for index in active}
        left_chars = {index: chars for index in active}
        for item, seen in queue:
            view = self._ranks[item.index]
            if view.capped:
                continue
            count = item.count - seen
            take = min(count, left[item.index], self.live_lines - view.shown)
            lines = item.last(take)
            shown: list[str] = []
            for line in reversed(lines):  # the most recent lines win the character budget
                text = self._line(item.index, item.stream, line)
                if left_chars[item.index] < len(text) and shown:
                    break
                left_chars[item.index] -= len(text)
                shown.append(text)
            shown.reverse()
            label = self.state.ranks[item.index].label
            if count > len(shown):
                out.append(
                    (
                        OUT,
                        prefix(label, OUT, self.width)
                        + f"… {count - len(shown)} lines not shown (they are in the log)",
                    )
                )
            out.extend((item.stream, text) for text in shown)
            left[item.index] -= len(shown)
            view.shown += len(shown)
            if view.shown >= self.live_lines:
                view.capped = True
                out.append(
                    (
                        OUT,
                        prefix(label, OUT, self.width)
                        + f"… more output not shown live; the last {FINAL_TAIL} lines come at the end"
                        + (f" (full log: {self.state.log_path})" if self.state.log_path else ""),
                    )
                )
        if fold:
            out.append((OUT, fold))
        if self.tracebacks:
            out.extend(self._tracebacks(now, force))
        out.extend(self._partials(now))
        if not out:
            return []
        self._tokens -= 1.0
        self.writes += 1
        return coalesce(out)

    def _fold(
        self, queue: list[tuple[Fed, bool]], active: set[int]
    ) -> tuple[list[tuple[Fed, bool]], set[int], str]:
        """The queue of the SHOW_RANKS ranks this write shows (those with stderr first, then
        the others in turn from where the last fold stopped), and the line folding the rest."""
        errs = sorted({item.index for item, _ in queue if item.stream == ERR})
        n = len(self._ranks)
        rest = sorted(active.difference(errs), key=lambda index: (index - self._turn) % n)
        turn = rest[: max(0, SHOW_RANKS - len(errs))]
        if turn:
            self._turn = (turn[-1] + 1) % n
        shown = set(errs[:SHOW_RANKS] + turn)
        kept = [entry for entry in queue if entry[0].index in shown]
        lines = sum(item.count - seen for item, seen in queue if item.index not in shown)
        others = len(active) - len(shown)
        fold = f"… {others} more ranks printed {lines} lines (they are in the log"
        fold += f": {self.state.log_path})" if self.state.log_path else ")"
        return kept, shown, fold

    def _folded(self, now: float, out: list[tuple[str, str]], force: bool) -> list[tuple[str, str]]:
        """One write of ``--group``'s live fold: the lines its groups are ready to show."""
        assert self.fold is not None
        self.fold.tick(now)
        lines = self.fold.flush() if force else self.fold.take(self.write_lines)
        out.extend((OUT, line) for line in lines)  # a group's lines may mix streams: one stream
        if not out:
            return []
        self._tokens -= 1.0
        self.writes += 1
        return coalesce(out)

    def _tracebacks(self, now: float, force: bool) -> list[tuple[str, str]]:
        """The held tracebacks now due, each once, labelled with the ranks that printed it."""
        assert self.tracebacks is not None
        out: list[tuple[str, str]] = []
        # a rank that exited may still have output on its way: any may print it until the run ends
        live = set() if self.state.finished else set(range(len(self.state.ranks)))
        for folded in self.tracebacks.ready(now, live, force):
            ranks = [self.state.ranks[i] for i in folded.ranks]
            label = ranks[0].label if len(ranks) == 1 else rank_set(tuple(r.point.items()) for r in ranks)
            head = prefix(label, ERR, self.width)
            out.extend((ERR, head + line) for line in folded.lines)
        return out

    def _line(self, index: int, stream: str, line: str) -> str:
        """A labelled line (the model already cut it to LINE_CHARS)."""
        return prefix(self.state.ranks[index].label, stream, self.width) + line

    def _partials(self, now: float) -> list[tuple[str, str]]:
        """Lines still without a newline (prompts, \\r progress bars), shown as they stand."""
        out: list[tuple[str, str]] = []
        for index, rank in enumerate(self.state.ranks):
            pending = rank.pending
            if not pending[OUT] and not pending[ERR]:
                continue  # nothing unfinished (most ranks, most of the time): nothing to read
            view = self._ranks[index]
            if view.capped:
                continue
            for stream in (OUT, ERR):
                text = rank.partial(stream)
                if not text or text == view.partial[stream]:
                    continue
                if self.in_place and rank.rewound[stream] and not view.partial[stream]:
                    self._progress_line(index, stream, text, now)
                    continue
                since = view.since[stream]
                if since is None:
                    since = view.since[stream] = now
                if now - since < PARTIAL_AFTER:
                    continue
                if view.partial[stream] and now - view.partial_at < PARTIAL_EVERY:
                    continue
                view.partial[stream] = text
                view.partial_at = now
                out.append((stream, self._line(index, stream, text)))
        return out

    def _progress_line(self, index: int, stream: str, text: str, now: float) -> None:
        """A \r-rewritten line (after PARTIAL_AFTER, as any unfinished line) kept for the
        progress view instead of the stream."""
        key = (index, stream)
        if key not in self._progress:
            view = self._ranks[index]
            since = view.since[stream]
            if since is None:
                since = view.since[stream] = now
            if now - since < PARTIAL_AFTER:
                return
        line = self._line(index, stream, text)
        if self._progress.get(key) != line:
            self._progress[key] = line
            self._progress_changed = True

    def take_progress(self, now: float, force: bool = False) -> str | None:
        """The progress lines, one per rank and stream in rank order, when they changed and
        PROGRESS_EVERY passed (``force``: the run's end); None: nothing to update. A view shows
        them in one place it updates (the cell's display), so a bar is never a new line."""
        if not self._progress_changed or (not force and now - self._progress_at < PROGRESS_EVERY):
            return None
        self._progress_changed = False
        self._progress_at = now
        return "".join(self._progress[key] + "\n" for key in sorted(self._progress))

    def finish(self) -> str:
        """Text after the run: pending lines, tails of capped ranks (and nothing else)."""
        return "".join(text for _, text in self.finish_streams())

    def finish_streams(self) -> list[tuple[str, str]]:
        """:meth:`finish` as ``(stream, text)`` parts (see :meth:`flush_streams`)."""
        parts = self.flush_streams(0.0, force=True) if self.live else []
        extra: list[tuple[str, str]] = []
        ranks = self.state.ranks
        capped = [i for i, view in enumerate(self._ranks) if view.capped] if self.live else []
        more = len(capped) - SHOW_RANKS
        if more > 0:  # failing ranks first; the others' tails are in the log
            capped.sort(key=lambda index: not ranks[index].failing)
            capped = sorted(capped[:SHOW_RANKS])
        for index in capped:
            rank = ranks[index]
            tail = list(rank.lines)[-FINAL_TAIL:]
            extra.append(
                (
                    OUT,
                    prefix(rank.label, OUT, self.width) + f"… last {len(tail)} of {rank.total_lines} lines:",
                )
            )
            extra.extend((stream, self._line(index, stream, line)) for stream, line in tail)
        if more > 0:
            extra.append((OUT, f"… the last lines of {more} more ranks are in the log"))
        return coalesce(parts + coalesce(extra)) if extra else parts


def coalesce(lines: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``(stream, line)`` pairs (or already coalesced parts) as the fewest ``(stream, text)``
    parts in the same order, each text ending with a newline."""
    parts: list[tuple[str, str]] = []
    for stream, text in lines:
        text = text if text.endswith("\n") else text + "\n"
        if parts and parts[-1][0] == stream:
            parts[-1] = (stream, parts[-1][1] + text)
        else:
            parts.append((stream, text))
    return parts


_GroupKey = tuple[tuple[tuple[str, str], ...], str, "int | None", int]


def _end_groups(state: RunState) -> dict[_GroupKey, list[RankState]]:
    groups: dict[_GroupKey, list[RankState]] = {}
    for rank in state.ranks:
        key = (tuple(rank.lines), rank.status, rank.returncode, rank.truncated)
        groups.setdefault(key, []).append(rank)
    return groups


SAME_GROUPS = "(--group: same groups as above)\n"


def group_end_text(state: RunState, renderer: TextRenderer) -> str:
    """``--group``'s view after the run: :func:`group_text`, or one line when the live fold
    already showed every line under exactly those groups (the same ranks together, nothing
    held back: a live view that was on)."""
    fold = renderer.fold
    if fold is None or not renderer.live:
        return group_text(state)
    index = {id(rank): i for i, rank in enumerate(state.ranks)}
    ended = {frozenset(index[id(r)] for r in members) for members in _end_groups(state).values()}
    live = {frozenset(g.members) for g in fold.groups if g.members}
    return SAME_GROUPS if ended == live else group_text(state)


def group_text(state: RunState) -> str:
    """``clush -b`` style: identical outputs once, under the ranks that produced them."""
    groups = _end_groups(state)
    out = []
    for (lines, status, returncode, truncated), members in groups.items():
        names = ", ".join(m.label for m in members)
        header = f"{names} ({len(members)})"
        if status != "ok":
            header += f" · {status.replace('_', ' ')}"
            if returncode is not None:
                header += f", rc {returncode}"
        out.append(f"---------------- {header} ----------------")
        if truncated:
            out.append(f"… {truncated} earlier lines are in the log")
        for stream, line in lines:
            out.append(line if stream == OUT else "[err] " + line)
    return "\n".join(out) + ("\n" if out else "")
