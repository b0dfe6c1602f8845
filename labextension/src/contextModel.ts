/**
 * Pure model of the Monarch sidebar: the server's `/monarch-jupyter/contexts`
 * JSON turned into view items.
 */

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

/** One entry of the server's response. */
export interface IContextEntry {
  name: string;
  dir: string;
  active: boolean;
  state: string;
  status: IContextStatus | null;
}

/** The server's response. */
export interface IContextsResponse {
  root: string;
  contexts: IContextEntry[];
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
      ['applied', text(status.applied)],
      ['updated', text(status.updated)]
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
    details: details.filter(([, value]) => value !== '')
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
