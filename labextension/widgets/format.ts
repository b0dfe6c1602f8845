/** The run grid's texts: pure functions of the synced state. */

import { ansiSegments } from '../src/ansi';
import type { ITile, IUsage } from './types';

/**
 * `text` without any terminal control (a tile's one-line preview).
 * @param text
 */
export function plainText(text: string) {
  return ansiSegments(text)
    .map(part => part.text)
    .join('');
}

/**
 * "4.2s", "2m 05s"; empty for an unknown time.
 * @param seconds
 */
export function formatSeconds(seconds: number | null | undefined) {
  if (seconds === null || seconds === undefined || seconds < 0) {
    return '';
  }
  if (seconds < 60) {
    return `${seconds.toFixed(1)}s`;
  }
  const whole = Math.round(seconds);
  return `${Math.floor(whole / 60)}m ${String(whole % 60).padStart(2, '0')}s`;
}

/**
 * [[0, 2], [5, 5]] -> [0, 1, 2, 5]
 * @param runs
 */
export function expandRuns(runs: number[][]) {
  const out: number[] = [];
  for (const [first, last] of runs) {
    for (let i = first; i <= last; i++) {
      out.push(i);
    }
  }
  return out;
}

/**
 * "310 MB", "1.2 GB" (decimal units, as remote/view/resources.py writes them).
 * @param bytes
 */
export function formatBytes(bytes: number | null | undefined) {
  if (bytes === null || bytes === undefined || bytes < 0) {
    return '';
  }
  let value = bytes;
  for (const unit of ['B', 'KB', 'MB', 'GB']) {
    if (value < 1000 || unit === 'GB') {
      return unit === 'B' || unit === 'KB' || value >= 100
        ? `${Math.round(value)} ${unit}`
        : `${value.toFixed(1)} ${unit}`;
    }
    value /= 1000;
  }
  return '';
}

/**
 * "cpu 98% · 1.2 GB · gpu 900 MiB"; '' without a sample.
 * @param usage
 */
export function usageText(usage: IUsage | undefined) {
  if (!usage || usage.cpu === null || usage.cpu === undefined) {
    return '';
  }
  let text = `cpu ${Math.round(usage.cpu)}% · ${formatBytes(usage.rss)}`;
  if (usage.gpu_mib !== null && usage.gpu_mib !== undefined) {
    text += ` · gpu ${usage.gpu_mib} MiB`;
  }
  return text;
}

/**
 * "failed · rc 3", "running", "timed out".
 * @param tile
 */
export function statusText(tile: ITile) {
  const status = tile.status.replace('_', ' ');
  if (
    tile.returncode !== null &&
    tile.returncode !== undefined &&
    tile.status !== 'running'
  ) {
    return `${status} · rc ${tile.returncode}`;
  }
  return status;
}
