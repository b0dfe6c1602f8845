/**
 * Pure model of a `%%remote` run result (mimetype application/vnd.monarch.remote+json).
 *
 * Parsing, validation, filtering and text formatting live here, free of DOM
 * code, so they are unit-testable.
 */

/*
 * The payload and its status vocabulary are defined once, in
 * monarch_jupyter/schema/remote-run.schema.json (a JSON Schema). The constants
 * below are typed copies of it: src/__tests__/schema.spec.ts fails when they
 * differ from the schema.
 */

/** The mimetype the kernel side displays run results with (schema: x-mime-type). */
export const MIME_TYPE = 'application/vnd.monarch.remote+json';

/** The payload version the kernel side writes (schema: the largest of version). */
export const FORMAT_VERSION = 2;

/** Every payload version this renderer understands (schema: version). */
export const FORMAT_VERSIONS: readonly number[] = [1, 2];

/** Whether the run had ended when the payload was written (schema: state, version 2). */
export const RUN_STATES = ['running', 'finished'] as const;

export type RunStateName = (typeof RUN_STATES)[number];

/** Every status a rank can be in, in display order (schema: $defs.status). */
export const RANK_STATUSES = [
  'running',
  'ok',
  'failed',
  'timed_out',
  'interrupted',
  'skipped',
  'pending'
] as const;

export type RankStatus = (typeof RANK_STATUSES)[number];

/** What a rank ends as: the keys of the summary (schema: $defs.finalStatus). */
export const FINAL_STATUSES = [
  'ok',
  'failed',
  'timed_out',
  'skipped',
  'interrupted'
] as const;

export type FinalStatus = (typeof FINAL_STATUSES)[number];

/** Final statuses that count as a failure (schema: $defs.failingStatus). */
export const FAILING_STATUSES: readonly RankStatus[] = [
  'failed',
  'timed_out',
  'interrupted'
];

/** Which stream a line came from. */
export type Stream = 'out' | 'err';

/** One output line: [stream, text]. */
export type Line = [Stream, string];

/** Per-status counts over all ranks. */
export type Summary = Record<FinalStatus, number>;

/** One rank's result. */
export interface IRank {
  label: string;
  mesh: string;
  point: Record<string, number>;
  rank: number;
  status: RankStatus;
  returncode: number | null;
  duration: number | null;
  lines: Line[];
  truncated: number;
  /** Why the rank could not run or report, when the kernel side knows. */
  error: string | null;
}

/** A whole run result. */
export interface IRunResult {
  version: number;
  command: string;
  mode: string;
  target: string;
  started: string;
  duration: number | null;
  log_path: string | null;
  summary: Summary;
  ranks: IRank[];
  /** Ranks of the payload not parsed (beyond MAX_RANKS). */
  omitted: number;
  /** The run's id (version 2; null in version 1). */
  run_id: string | null;
  /** 'running': written while the run went on (version 2); version 1 is always finished. */
  state: RunStateName;
  /** A detached run's running payload: no cell replaced it when the run ended. */
  detached: boolean;
  /** The cell streamed the lines above this result: the ranks carry none, and none are drawn. */
  streamed: boolean;
  /** The result stands under the cell that ran it: the command is that cell's input. */
  own_cell: boolean;
}

/*
 * Bounds on what a (possibly hostile) saved payload costs the tab: ranks parsed,
 * lines and characters kept; values outside the schema's ranges read as unknown.
 */

/** Ranks parsed from one payload; failing ranks are taken first. */
export const MAX_RANKS = 10000;

/** Lines kept per rank (the last ones; the others count as truncated). */
export const MAX_LINES = 500;

/** Characters kept per line (the kernel side cuts long lines well before). */
export const MAX_LINE_CHARS = 4000;

/** Characters of line text kept over the whole payload. */
export const MAX_TEXT_CHARS = 4_000_000;

/** Characters kept of any other string (command, label, error...). */
export const MAX_STRING_CHARS = 10000;

/** Durations above this (seconds, ~31 years) read as unknown. */
export const MAX_DURATION = 1e9;

/** Thrown by `parseRunResult` when the payload is not a valid result. */
export class RunResultError extends Error {}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function str(obj: Record<string, unknown>, key: string, where: string): string {
  const value = obj[key];
  if (typeof value !== 'string') {
    throw new RunResultError(`${where}.${key} must be a string`);
  }
  return cut(value, MAX_STRING_CHARS);
}

/** `text` cut to `max` characters, with an ellipsis when cut. */
export function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

function optStr(obj: Record<string, unknown>, key: string): string | null {
  const value = obj[key];
  return typeof value === 'string' ? cut(value, MAX_STRING_CHARS) : null;
}

/** A duration in the schema's range [0, MAX_DURATION], else null (unknown). */
function optDuration(obj: Record<string, unknown>, key: string): number | null {
  const value = obj[key];
  return typeof value === 'number' && value >= 0 && value <= MAX_DURATION
    ? value
    : null;
}

/** A safe integer (the schema's "integer"), else null. */
function optInt(obj: Record<string, unknown>, key: string): number | null {
  const value = obj[key];
  return Number.isSafeInteger(value) ? (value as number) : null;
}

function count(value: unknown): number {
  return Number.isSafeInteger(value) && (value as number) > 0
    ? (value as number)
    : 0;
}

function parseLine(value: unknown, where: string): Line {
  if (
    !Array.isArray(value) ||
    value.length !== 2 ||
    (value[0] !== 'out' && value[0] !== 'err') ||
    typeof value[1] !== 'string'
  ) {
    throw new RunResultError(`${where} must be ["out"|"err", string]`);
  }
  return [value[0], cut(value[1], MAX_LINE_CHARS)];
}

function parsePoint(value: unknown): Record<string, number> {
  const point: Record<string, number> = {};
  if (isObject(value)) {
    for (const [dim, coord] of Object.entries(value).slice(0, 16)) {
      if (Number.isSafeInteger(coord)) {
        point[cut(dim, 100)] = coord as number;
      }
    }
  }
  return point;
}

/** What is left of MAX_TEXT_CHARS while one payload is parsed. */
interface IBudget {
  chars: number;
}

/** The last MAX_LINES lines that fit the budget; the count of those dropped. */
function parseLines(
  lines: unknown[],
  where: string,
  budget: IBudget
): [Line[], number] {
  const start = Math.max(0, lines.length - MAX_LINES);
  const kept: Line[] = [];
  for (let i = lines.length - 1; i >= start; i--) {
    const line = parseLine(lines[i], `${where}.lines[${i}]`);
    if (line[1].length > budget.chars) {
      break;
    }
    budget.chars -= line[1].length;
    kept.push(line);
  }
  kept.reverse();
  return [kept, lines.length - kept.length];
}

function parseRank(value: unknown, index: number, budget: IBudget): IRank {
  const where = `ranks[${index}]`;
  if (!isObject(value)) {
    throw new RunResultError(`${where} must be an object`);
  }
  const status = value.status;
  if (!RANK_STATUSES.includes(status as RankStatus)) {
    throw new RunResultError(`${where}.status is not a known status`);
  }
  const lines = value.lines ?? [];
  if (!Array.isArray(lines)) {
    throw new RunResultError(`${where}.lines must be a list`);
  }
  const [kept, dropped] = parseLines(lines, where, budget);
  const rank = optInt(value, 'rank');
  return {
    label: str(value, 'label', where),
    mesh: optStr(value, 'mesh') ?? '',
    point: parsePoint(value.point),
    rank: rank !== null && rank >= 0 ? rank : index,
    status: status as RankStatus,
    returncode: optInt(value, 'returncode'),
    duration: optDuration(value, 'duration'),
    lines: kept,
    truncated: Math.min(
      count(value.truncated) + dropped,
      Number.MAX_SAFE_INTEGER
    ),
    error: optStr(value, 'error')
  };
}

/** Indices of the ranks to parse, in payload order: failing ones first, at most MAX_RANKS. */
function pickRanks(ranks: unknown[]): number[] {
  if (ranks.length <= MAX_RANKS) {
    return ranks.map((_, i) => i);
  }
  const failing: number[] = [];
  const others: number[] = [];
  for (let i = 0; i < ranks.length; i++) {
    const raw = ranks[i];
    const status = isObject(raw) ? raw.status : undefined;
    if (FAILING_STATUSES.includes(status as RankStatus)) {
      if (failing.length < MAX_RANKS) {
        failing.push(i);
      }
    } else if (others.length < MAX_RANKS) {
      others.push(i);
    }
  }
  const picked = failing.concat(others.slice(0, MAX_RANKS - failing.length));
  return picked.sort((a, b) => a - b);
}

/** Validate an untrusted payload into an `IRunResult`, or throw `RunResultError`. */
export function parseRunResult(data: unknown): IRunResult {
  if (!isObject(data)) {
    throw new RunResultError('run result must be an object');
  }
  if (!FORMAT_VERSIONS.includes(data.version as number)) {
    throw new RunResultError(
      `unsupported run result version ${JSON.stringify(data.version)}`
    );
  }
  if (!Array.isArray(data.ranks)) {
    throw new RunResultError('ranks must be a list');
  }
  const budget: IBudget = { chars: MAX_TEXT_CHARS };
  const raw = data.ranks as unknown[];
  const ranks = pickRanks(raw).map(i => parseRank(raw[i], i, budget));
  const rawSummary = isObject(data.summary) ? data.summary : {};
  const summary = {} as Summary;
  for (const key of FINAL_STATUSES) {
    summary[key] = count(rawSummary[key]);
  }
  return {
    version: data.version as number,
    command: str(data, 'command', 'result'),
    mode: optStr(data, 'mode') ?? '',
    target: optStr(data, 'target') ?? '',
    started: optStr(data, 'started') ?? '',
    duration: optDuration(data, 'duration'),
    log_path: optStr(data, 'log_path'),
    summary,
    ranks,
    omitted: raw.length - ranks.length,
    run_id: optStr(data, 'run_id'),
    state: data.state === 'running' ? 'running' : 'finished',
    detached: data.detached === true,
    streamed: data.streamed === true,
    own_cell: data.own_cell === true
  };
}

/** The line that follows a run from any kernel of its folder. */
export function attachLine(result: IRunResult): string {
  return result.run_id ? `%remote attach ${result.run_id}` : '%remote attach';
}

/**
 * The note of a payload written while its run went on: shown when the notebook
 * was saved mid-run (beside a live grid the front end hides it). Empty for an
 * ended run.
 */
export function runningNote(result: IRunResult): string {
  if (result.state !== 'running') {
    return '';
  }
  const which = result.run_id ? `Run ${result.run_id}` : 'This run';
  if (result.detached) {
    return `${which} was started detached and may have ended since — run ${attachLine(result)} to see its output (live while it runs).`;
  }
  return `${which} was still running when saved — run ${attachLine(result)} to follow it (its output so far, then live).`;
}

/** True for a rank that did not finish cleanly (a failing status). */
export function isFailing(rank: IRank): boolean {
  return FAILING_STATUSES.includes(rank.status);
}

/** Ranks expanded by default when a result has at most this many. */
export const OPEN_ALL_MAX = 8;

/** Whether a rank's panel starts expanded: failing ranks always, others in small runs. */
export function initiallyOpen(rank: IRank, rankCount: number): boolean {
  return (
    isFailing(rank) || (rankCount <= OPEN_ALL_MAX && rank.lines.length > 0)
  );
}

/** The ranks to show: all of them, or only the failing ones. */
export function filterRanks(ranks: IRank[], failingOnly: boolean): IRank[] {
  return failingOnly ? ranks.filter(isFailing) : ranks;
}

/** Ranks rendered at first, and added by each "show more". */
export const PAGE_RANKS = 100;

/**
 * The ranks to show, in order: failing ranks first when there are more than
 * one page of them, so a failure among many ranks is on the first page.
 */
export function orderRanks(ranks: IRank[], failingOnly: boolean): IRank[] {
  const shown = filterRanks(ranks, failingOnly);
  if (failingOnly || shown.length <= PAGE_RANKS) {
    return shown;
  }
  return shown.filter(isFailing).concat(shown.filter(rank => !isFailing(rank)));
}

/** "Show 100 more ranks (99,800 not shown)"; empty when all are shown. */
export function moreText(shown: number, total: number, noun = 'rank'): string {
  const left = total - shown;
  if (left <= 0) {
    return '';
  }
  const next = Math.min(PAGE_RANKS, left);
  return `Show ${next} more ${noun}${next === 1 ? '' : 's'} (${left.toLocaleString('en-US')} not shown)`;
}

/** The note of ranks the payload had but this view did not read; empty if none. */
export function omittedNotice(omitted: number): string {
  return omitted > 0
    ? `${omitted.toLocaleString('en-US')} more rank${omitted === 1 ? '' : 's'} not read (too many for one view; the run log has them)`
    : '';
}

/** "1.23s", "2m 05s"; empty for an unknown duration. */
export function formatDuration(seconds: number | null): string {
  if (seconds === null || seconds < 0) {
    return '';
  }
  if (seconds < 60) {
    return `${seconds.toFixed(2)}s`;
  }
  const whole = Math.round(seconds);
  const minutes = Math.floor(whole / 60);
  return `${minutes}m ${String(whole % 60).padStart(2, '0')}s`;
}

/** "1 ok, 1 failed": the non-zero counts in a fixed order ("no ranks" if none). */
export function summaryText(summary: Summary): string {
  const parts = FINAL_STATUSES.filter(key => summary[key] > 0).map(
    key => `${summary[key]} ${key.replace('_', ' ')}`
  );
  return parts.length ? parts.join(', ') : 'no ranks';
}

/** "2 ranks: 1 ok, 1 running": every rank's status, for a run that had not ended; empty
 * when every rank is pending, the state a running payload is written in at the run's start
 * (the target already says how many ranks). */
export function progressText(ranks: IRank[]): string {
  if (ranks.every(rank => rank.status === 'pending')) {
    return '';
  }
  const head = `${ranks.length} rank${ranks.length === 1 ? '' : 's'}`;
  const parts = RANK_STATUSES.map(status => {
    const n = ranks.filter(rank => rank.status === status).length;
    return n ? `${n} ${status.replace('_', ' ')}` : '';
  }).filter(Boolean);
  return parts.length ? `${head}: ${parts.join(', ')}` : head;
}

/** The notice above a truncated line list; empty when nothing was dropped. */
export function truncatedNotice(truncated: number): string {
  if (truncated <= 0) {
    return '';
  }
  return `${truncated} earlier line${truncated === 1 ? '' : 's'} not shown`;
}

/** Badge text for a rank: its return code when it has one, else its status. */
export function badgeText(rank: IRank): string {
  if (rank.returncode !== null && rank.status !== 'running') {
    return `rc=${rank.returncode}`;
  }
  return rank.status.replace('_', ' ');
}

/** Colour class for a rank's badge: "ok", "failed" or "other". */
export function badgeKind(rank: IRank): 'ok' | 'failed' | 'other' {
  if (rank.status === 'ok') {
    return 'ok';
  }
  return isFailing(rank) ? 'failed' : 'other';
}
