/**
 * "Diff to majority" on a saved run result (pure; no DOM): the semantics of
 * `%%remote --diff` (monarch_jupyter/remote/view/diff.py) over the payload's ranks.
 *
 * Ranks with identical output (stderr lines marked `[err] `) form groups; the
 * largest is the majority (on a tie, the group seen first); every other group
 * is an outlier with a unified diff from the majority, 2 lines of context,
 * at most MAX_DIFF_LINES lines.
 */
import {
  FAILING_STATUSES,
  IRank,
  RANK_STATUSES,
  badgeKind,
  badgeText,
  cut,
  isFailing
} from './model';
import { unifiedDiff } from './diff';

/** Lines of context around each change (diff.py's CONTEXT). */
export const CONTEXT = 2;

/** Lines of diff kept per outlier group (diff.py's MAX_DIFF_LINES). */
export const MAX_DIFF_LINES = 200;

/** Characters kept of a group's label (a scattered set of 10,000 ranks is long). */
export const MAX_LABEL_CHARS = 500;

/** Ranks whose output is identical. */
export interface IGroup {
  /** The ranks' output as `--group` shows it. */
  readonly output: string[];
  readonly ranks: IRank[];
  /** `hosts=[0-2,4-7] (7)`, `hosts=3`. */
  readonly label: string;
}

/** A group whose label is made when first read: 4,096 groups, one page drawn. */
class Group implements IGroup {
  constructor(
    readonly output: string[],
    readonly ranks: IRank[]
  ) {}

  get label(): string {
    return (this._label ??= groupLabel(this.ranks));
  }

  private _label: string | undefined;
}

/** The diff view of a result: its head line(s), the majority and the outliers. */
export interface IOutliers {
  /** `--diff: hosts=[0-2,4-7] (7) agree; 1 outlier` and its notes; [] for one rank. */
  head: string[];
  majority: IGroup | null;
  outliers: IGroup[];
}

/** A rank's output as `--group` shows it: stderr lines marked `[err] `. */
export function outputOf(rank: IRank): string[] {
  return rank.lines.map(([stream, text]) =>
    stream === 'out' ? text : `[err] ${text}`
  );
}

/** `0,2-4,7` from sorted values. */
function runs(values: number[]): string {
  const parts: string[] = [];
  let i = 0;
  while (i < values.length) {
    let j = i;
    while (j + 1 < values.length && values[j + 1] === values[j] + 1) {
      j++;
    }
    parts.push(i === j ? `${values[i]}` : `${values[i]}-${values[j]}`);
    i = j + 1;
  }
  return parts.join(',');
}

/** rank_sets.rank_set(points, brackets=True): runs along the last dimension. */
function rankSet(ranks: IRank[]): string {
  const points = ranks.map(rank => Object.entries(rank.point));
  if (points.some(point => !point.length)) {
    return [...new Set(ranks.map(rank => rank.label))].join(',');
  }
  const unique = new Map(points.map(point => [JSON.stringify(point), point]));
  const sorted = [...unique.values()].sort((p, q) => {
    for (let k = 0; k < Math.min(p.length, q.length); k++) {
      if (p[k][1] !== q[k][1]) {
        return p[k][1] - q[k][1];
      }
    }
    return p.length - q.length;
  });
  const rows = new Map<string, [string, string, number[]]>();
  for (const point of sorted) {
    const head = point.slice(0, -1);
    const [last, value] = point[point.length - 1];
    const key = JSON.stringify(head);
    const prefix = head.map(([dim, v]) => `${dim}=${v}`).join(',');
    if (!rows.has(key)) {
      rows.set(key, [prefix, last, []]);
    }
    rows.get(key)![2].push(value);
  }
  return [...rows.values()]
    .map(([prefix, last, values]) => {
      const text = values.length > 1 ? `[${runs(values)}]` : runs(values);
      return prefix ? `${prefix},${last}=${text}` : `${last}=${text}`;
    })
    .join('; ');
}

/** quiet.ranks_label: `hosts=[0-6,8]`, or `a/hosts=…; b/hosts=…` across meshes. */
export function ranksLabel(ranks: IRank[]): string {
  const byMesh = new Map<string, IRank[]>();
  for (const rank of ranks) {
    const list = byMesh.get(rank.mesh);
    if (list) {
      list.push(rank);
    } else {
      byMesh.set(rank.mesh, [rank]);
    }
  }
  const several = byMesh.size > 1;
  return [...byMesh]
    .map(([mesh, members]) => (several ? `${mesh}/` : '') + rankSet(members))
    .join('; ');
}

function groupLabel(ranks: IRank[]): string {
  const label =
    ranksLabel(ranks) + (ranks.length > 1 ? ` (${ranks.length})` : '');
  return cut(label, MAX_LABEL_CHARS);
}

/** Groups ranks by output as they are added; `groups()` puts the majority first. */
class Grouper {
  add(rank: IRank): number {
    const output = outputOf(rank);
    const key = output.join('\n') + `\u0000${output.length}`;
    const group = this._byOutput.get(key);
    if (group) {
      group.ranks.push(rank);
    } else {
      this._byOutput.set(key, new Group(output, [rank]));
    }
    return key.length;
  }

  /** The largest first; on a tie, the first seen (the sort is stable). */
  groups(): IGroup[] {
    return [...this._byOutput.values()].sort(
      (x, y) => y.ranks.length - x.ranks.length
    );
  }

  private _byOutput = new Map<string, Group>();
}

/** Ranks with identical output, the majority first (largest; on a tie, the first seen). */
export function groupRanks(ranks: IRank[]): IGroup[] {
  const grouper = new Grouper();
  ranks.forEach(rank => grouper.add(rank));
  return grouper.groups();
}

/** Characters of output grouped between two pauses of `findOutliersInSlices`. */
export const SLICE_CHARS = 100_000;

/**
 * `findOutliers` in slices of SLICE_CHARS, awaiting `pause()` between them:
 * 10,000 ranks of long output never hold the page for one long task.
 */
export async function findOutliersInSlices(
  ranks: IRank[],
  pause: () => Promise<void>
): Promise<IOutliers> {
  const grouper = new Grouper();
  let chars = 0;
  for (const rank of ranks) {
    chars += grouper.add(rank);
    if (chars > SLICE_CHARS) {
      chars = 0;
      await pause();
    }
  }
  return outliersOf(ranks, grouper.groups());
}

/** The groups of `ranks` and the head line `--diff` writes above them. */
export function findOutliers(ranks: IRank[]): IOutliers {
  return outliersOf(ranks, groupRanks(ranks));
}

function outliersOf(ranks: IRank[], groups: IGroup[]): IOutliers {
  if (ranks.length < 2) {
    return { head: [], majority: null, outliers: [] };
  }
  const [majority, ...outliers] = groups;
  if (!outliers.length) {
    return {
      head: [`--diff: all ${ranks.length} ranks printed the same`],
      majority,
      outliers
    };
  }
  const count = outliers.reduce((n, group) => n + group.ranks.length, 0);
  let first = `--diff: ${majority.label} agree; ${count} outlier${count !== 1 ? 's' : ''}`;
  if (majority.ranks.length === 1) {
    first +=
      ' (no majority: each differs; the diffs are against the first rank)';
  }
  const head = [first];
  if (ranks.some(rank => rank.truncated > 0)) {
    head.push("(each rank's last lines are compared; the log has them all)");
  }
  return { head, majority, outliers };
}

/** The unified diff of one outlier group from the majority, cut to MAX_DIFF_LINES. */
export function outlierDiff(majority: IGroup, outlier: IGroup): string[] {
  const diff = unifiedDiff(
    majority.output,
    outlier.output,
    majority.label,
    outlier.label,
    CONTEXT
  );
  if (diff.length > MAX_DIFF_LINES) {
    const more = diff.length - MAX_DIFF_LINES;
    return [...diff.slice(0, MAX_DIFF_LINES), `… ${more} more lines of diff`];
  }
  return diff;
}

/** The whole text `%%remote --diff` writes for these ranks ('' for one rank). */
export function diffText(ranks: IRank[]): string {
  const found = findOutliers(ranks);
  if (!found.head.length) {
    return '';
  }
  const lines = [...found.head];
  for (const group of found.outliers) {
    lines.push(...outlierDiff(found.majority!, group));
  }
  return lines.join('\n') + '\n';
}

/** Outlier groups with a failing rank: what "failing only" keeps of the diff view. */
export function failingGroups(groups: IGroup[]): IGroup[] {
  return groups.filter(group => group.ranks.some(isFailing));
}

/** The kind of line `index` of `outlierDiff`'s lines, for its colour. */
export function lineKind(
  line: string,
  index: number
): 'file' | 'hunk' | 'add' | 'del' | 'ctx' | 'note' {
  if (index < 2) {
    return 'file';
  }
  if (line.startsWith('@@ ')) {
    return 'hunk';
  }
  if (line.startsWith('+')) {
    return 'add';
  }
  if (line.startsWith('-')) {
    return 'del';
  }
  return line.startsWith(' ') ? 'ctx' : 'note';
}

/** A group's badge: one rank's own (`rc=1`), else its statuses (`2 failed, 1 ok`). */
export function groupBadge(group: IGroup): {
  text: string;
  kind: 'ok' | 'failed' | 'other';
} {
  const { ranks } = group;
  if (ranks.length === 1) {
    return { text: badgeText(ranks[0]), kind: badgeKind(ranks[0]) };
  }
  const counts = new Map<string, number>();
  for (const rank of ranks) {
    counts.set(rank.status, (counts.get(rank.status) ?? 0) + 1);
  }
  const failingFirst = [...RANK_STATUSES].sort(
    (x, y) =>
      Number(FAILING_STATUSES.includes(y)) -
      Number(FAILING_STATUSES.includes(x))
  );
  const text = failingFirst
    .filter(status => counts.has(status))
    .map(status => `${counts.get(status)} ${status.replace('_', ' ')}`)
    .join(', ');
  const kind = ranks.some(isFailing)
    ? 'failed'
    : ranks.every(rank => rank.status === 'ok')
      ? 'ok'
      : 'other';
  return { text, kind };
}
