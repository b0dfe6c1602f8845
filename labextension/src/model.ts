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
  /** The run's id (version 2; null in version 1). */
  run_id: string | null;
  /** 'running': written while the run went on (version 2); version 1 is always finished. */
  state: RunStateName;
}

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
  return value;
}

function optStr(obj: Record<string, unknown>, key: string): string | null {
  const value = obj[key];
  return typeof value === 'string' ? value : null;
}

function optNum(obj: Record<string, unknown>, key: string): number | null {
  const value = obj[key];
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isInteger(value) && value > 0
    ? value
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
  return [value[0], value[1]];
}

function parsePoint(value: unknown): Record<string, number> {
  const point: Record<string, number> = {};
  if (isObject(value)) {
    for (const [dim, coord] of Object.entries(value)) {
      if (typeof coord === 'number') {
        point[dim] = coord;
      }
    }
  }
  return point;
}

function parseRank(value: unknown, index: number): IRank {
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
  return {
    label: str(value, 'label', where),
    mesh: optStr(value, 'mesh') ?? '',
    point: parsePoint(value.point),
    rank: optNum(value, 'rank') ?? index,
    status: status as RankStatus,
    returncode: optNum(value, 'returncode'),
    duration: optNum(value, 'duration'),
    lines: lines.map((line, i) => parseLine(line, `${where}.lines[${i}]`)),
    truncated: count(value.truncated),
    error: optStr(value, 'error')
  };
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
  const ranks = data.ranks.map(parseRank);
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
    duration: optNum(data, 'duration'),
    log_path: optStr(data, 'log_path'),
    summary,
    ranks,
    run_id: optStr(data, 'run_id'),
    state: data.state === 'running' ? 'running' : 'finished'
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

/** "2 ranks: 1 ok, 1 running": every rank's status, for a run that had not ended. */
export function progressText(ranks: IRank[]): string {
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
