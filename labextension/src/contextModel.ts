/**
 * Pure model of the Monarch sidebar: the server's `/monarch-jupyter/contexts`
 * JSON turned into view items.
 */

import { hasDashboard } from './dashboardModel';

/** One mesh as written by the kernel side in status.json. */
export interface IMeshStatus {
  name: string;
  hosts: number | null;
  live_workers: number | null;
}

/** A context's status.json, as far as the panel uses it. */
export interface IContextStatus {
  context: string;
  job_class: string;
  apply_id: string;
  spec: string;
  state: string;
  meshes: IMeshStatus[];
  urls: Record<string, string | null>;
  updated: string;
  applied?: string | null;
}

/** A running run of a context, from its runs index (runs/<id>.json). */
export interface IRunEntry {
  id: string;
  command: string;
  target: string;
  /** Epoch seconds. */
  started: number | null;
  state: string;
  detached?: boolean;
  attach: string;
}

/** One entry of the server's response. */
export interface IContextEntry {
  name: string;
  dir: string;
  active: boolean;
  state: string;
  status: IContextStatus | null;
  runs?: IRunEntry[];
}

/** What the panel shows for one running run. */
export interface IRunItem {
  id: string;
  command: string;
  target: string;
  /** "2026-12-01 01:02:03" (local time), '' when unknown. */
  started: string;
  state: string;
  /** The line to run in a notebook of the folder: `%remote attach <id>`. */
  attach: string;
}

/** The server's response. */
export interface IContextsResponse {
  root: string;
  contexts: IContextEntry[];
  /** c.MonarchJupyter.poll_interval: seconds between the sidebar's refreshes. */
  poll_seconds?: number;
  /** The server left contexts or folders out (too many to send). */
  truncated?: boolean;
}

/** The refresh interval a response asks for, in ms; `fallback` when it names none or a bad one. */
export function pollMs(response: unknown, fallback: number): number {
  const seconds =
    typeof response === 'object' && response !== null
      ? (response as IContextsResponse).poll_seconds
      : undefined;
  return typeof seconds === 'number' &&
    Number.isFinite(seconds) &&
    seconds >= 0.5
    ? seconds * 1000
    : fallback;
}

/** The note under a response the server had to cut; empty when it sent everything. */
export function truncatedNote(response: unknown): string {
  const cut =
    typeof response === 'object' &&
    response !== null &&
    (response as IContextsResponse).truncated === true;
  return cut
    ? 'Not every context is listed: the folder has too many contexts or subfolders.'
    : '';
}

/** What the panel shows for one context. */
export interface IContextItem {
  /** Unique key: the context directory relative to the server root. */
  key: string;
  name: string;
  /** Folder holding the .monarch directory; '' for the server root. */
  folder: string;
  active: boolean;
  state: string;
  /** "hosts ×2 (2 live)", one per mesh. */
  meshes: string[];
  /** Key/value rows for the details view. */
  details: [string, string][];
  /** The context's running runs, newest first. */
  runs: IRunItem[];
  /** Its running job records a dashboard (served by the server at monarch-jupyter/dashboard/). */
  dashboard: boolean;
}

const STATES = ['running', 'not running', 'workers dead', 'no job', 'unknown'];

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function meshText(mesh: IMeshStatus): string {
  const hosts = mesh.hosts === null ? '?' : String(mesh.hosts);
  const live = mesh.live_workers === null ? '' : ` (${mesh.live_workers} live)`;
  return `${mesh.name} ×${hosts}${live}`;
}

function parseMeshes(value: unknown): IMeshStatus[] {
  if (!Array.isArray(value)) {
    return [];
  }
  return value
    .filter(mesh => typeof mesh === 'object' && mesh !== null)
    .map(mesh => ({
      name: text(mesh.name) || '?',
      hosts: num(mesh.hosts),
      live_workers: num(mesh.live_workers)
    }));
}

/** A known state string, defaulting to "unknown". */
export function normalizeState(value: unknown): string {
  return typeof value === 'string' && STATES.includes(value)
    ? value
    : 'unknown';
}

/** The folder part of a context dir: "proj/.monarch/default" → "proj". */
export function folderOf(dir: string): string {
  const parts = dir.split('/');
  const at = parts.lastIndexOf('.monarch');
  return at > 0 ? parts.slice(0, at).join('/') : '';
}

/** "2026-12-01 01:02:03" in local time for epoch seconds; '' when unknown. */
export function formatStarted(seconds: number | null): string {
  if (seconds === null) {
    return '';
  }
  const d = new Date(seconds * 1000);
  const two = (n: number): string => String(n).padStart(2, '0');
  return (
    `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ` +
    `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`
  );
}

/** An ISO 8601 moment (the server's UTC) as local time, like `formatStarted`; other text as it is. */
export function formatIso(value: string): string {
  const ms = value ? Date.parse(value) : NaN;
  return Number.isNaN(ms) ? value : formatStarted(ms / 1000);
}

/** The running runs of an entry; malformed ones are dropped. */
export function parseRuns(value: unknown): IRunItem[] {
  if (!Array.isArray(value)) {
    return [];
  }
  return value
    .filter(
      run =>
        typeof run === 'object' &&
        run !== null &&
        typeof run.id === 'string' &&
        run.id !== ''
    )
    .map(run => ({
      id: run.id,
      command: text(run.command),
      target: text(run.target),
      started: formatStarted(num(run.started)),
      state: text(run.state) || 'running',
      attach: `%remote attach ${run.id}`
    }));
}

/** Turn one response entry into a view item. */
export function toItem(entry: IContextEntry): IContextItem {
  const status = entry.status;
  const meshes = parseMeshes(status?.meshes);
  const details: [string, string][] = [['directory', entry.dir]];
  if (status) {
    details.push(
      ['job class', text(status.job_class)],
      ['apply id', text(status.apply_id)],
      ['spec', text(status.spec)],
      ['applied', formatIso(text(status.applied))],
      ['updated', formatIso(text(status.updated))]
    );
    const urls = status.urls ?? {};
    for (const [name, url] of Object.entries(urls)) {
      if (typeof url === 'string' && url) {
        details.push([`${name} url`, url]);
      }
    }
  }
  return {
    key: entry.dir,
    name: entry.name,
    folder: folderOf(entry.dir),
    active: entry.active === true,
    state: normalizeState(entry.state ?? status?.state),
    meshes: meshes.map(meshText),
    details: details.filter(([, value]) => value !== ''),
    runs: parseRuns(entry.runs),
    dashboard: hasDashboard(entry)
  };
}

/**
 * View items for a response: the server's order, contexts of the root folder
 * first. Malformed entries are dropped.
 */
export function toItems(response: unknown): IContextItem[] {
  if (typeof response !== 'object' || response === null) {
    return [];
  }
  const contexts = (response as IContextsResponse).contexts;
  if (!Array.isArray(contexts)) {
    return [];
  }
  const items = contexts
    .filter(
      entry =>
        typeof entry === 'object' &&
        entry !== null &&
        typeof entry.name === 'string' &&
        typeof entry.dir === 'string'
    )
    .map(toItem);
  return [
    ...items.filter(item => item.folder === ''),
    ...items.filter(item => item.folder !== '')
  ];
}

/** CSS-friendly token for a state: "not running" → "not-running". */
export function stateClass(state: string): string {
  return normalizeState(state).replace(/ /g, '-');
}
