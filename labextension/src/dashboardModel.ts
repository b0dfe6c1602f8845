/**
 * Pure part of the "Monarch dashboard" panel (dashboard.ts): the proxied path
 * of a context, whether a context has a dashboard, which context runs a job.
 */
import type { IContextEntry, IContextsResponse } from './contextModel';

/** The server extension's URL namespace (request.ts's, repeated: this module imports nothing). */
const API_NAMESPACE = 'monarch-jupyter';

/** The proxied path of a context dir, relative to the server's base URL. */
export function dashboardPath(dir: string): string {
  const quoted = dir
    .split('/')
    .filter(part => part !== '')
    .map(encodeURIComponent)
    .join('/');
  return `${API_NAMESPACE}/dashboard/${quoted}/`;
}

/** Whether a context's status records a dashboard (its own, or the telemetry URL that serves it). */
export function hasDashboard(entry: IContextEntry): boolean {
  const urls = entry.status?.urls ?? {};
  const url = urls['dashboard'] || urls['telemetry'];
  return entry.state === 'running' && typeof url === 'string' && url !== '';
}

/** The context dir whose status names `applyId`, of a contexts response; null if none. */
export function dirOfApplyId(
  response: unknown,
  applyId: string
): string | null {
  const contexts = (response as IContextsResponse | null)?.contexts;
  if (!Array.isArray(contexts) || !applyId) {
    return null;
  }
  const found = contexts.find(
    entry =>
      typeof entry?.dir === 'string' && entry.status?.apply_id === applyId
  );
  return found ? found.dir : null;
}
