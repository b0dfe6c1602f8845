import * as fs from 'fs';
import * as path from 'path';

import { unifiedDiff } from '../diff';
import { IRank, parseRunResult } from '../model';
import {
  MAX_DIFF_LINES,
  MAX_LABEL_CHARS,
  diffText,
  failingGroups,
  findOutliers,
  findOutliersInSlices,
  groupBadge,
  lineKind,
  outlierDiff,
  ranksLabel
} from '../outliers';

/** Written by tests/unit/test_diff_parity.py from real RunState payloads and diff.py. */
const CASES: { name: string; payload: unknown; diff: string }[] = JSON.parse(
  fs.readFileSync(path.join(__dirname, 'diff-cases.json'), 'utf8')
);

function rank(i: number, lines: string[], status = 'ok'): IRank {
  return {
    label: `hosts=${i}`,
    mesh: 'hosts',
    point: { hosts: i },
    rank: i,
    status: status as IRank['status'],
    returncode: status === 'ok' ? 0 : 1,
    duration: null,
    lines: lines.map(text => ['out', text]),
    truncated: 0,
    error: null
  };
}

describe('diff to majority: the same text as %%remote --diff', () => {
  it.each(CASES.map(c => [c.name, c] as const))('%s', (_, c) => {
    expect(diffText(parseRunResult(c.payload).ranks)).toBe(c.diff);
  });

  it('has cases that exercise what can differ', () => {
    const all = CASES.map(c => c.diff).join('');
    expect(CASES.length).toBeGreaterThan(30);
    expect(all).toMatch(/no majority/);
    expect(all).toMatch(/more lines of diff/);
    expect(all).toMatch(/@@ -0,0 \+1 @@/);
    expect(all).toMatch(/\+\[err\] /);
  });
});

describe('unifiedDiff', () => {
  it('writes headers, hunks and context as difflib does', () => {
    const a = ['1', '2', '3', '4', '5', '6', '7', '8', '9'];
    const b = ['1', '2', 'x', '4', '5', '6', '7', '8', 'y'];
    expect(unifiedDiff(a, b, 'A', 'B', 2)).toEqual([
      '--- A',
      '+++ B',
      '@@ -1,5 +1,5 @@',
      ' 1',
      ' 2',
      '-3',
      '+x',
      ' 4',
      ' 5',
      '@@ -7,3 +7,3 @@',
      ' 7',
      ' 8',
      '-9',
      '+y'
    ]);
  });

  it('is empty for equal inputs and says empty ranges as difflib does', () => {
    expect(unifiedDiff(['a'], ['a'], 'A', 'B', 2)).toEqual([]);
    expect(unifiedDiff([], [], 'A', 'B', 2)).toEqual([]);
    expect(unifiedDiff(['a'], [], 'A', 'B', 2)).toEqual([
      '--- A',
      '+++ B',
      '@@ -1 +0,0 @@',
      '-a'
    ]);
  });
});

describe('outliers', () => {
  it('labels rank sets in clush notation, across meshes too', () => {
    const ranks = [0, 1, 2, 4, 7].map(i => rank(i, []));
    expect(ranksLabel(ranks)).toBe('hosts=[0-2,4,7]');
    expect(ranksLabel([rank(5, [])])).toBe('hosts=5');
    const other = { ...rank(0, []), mesh: 'gpus', point: { gpus: 0 } };
    expect(ranksLabel([rank(0, []), other])).toBe('hosts/hosts=0; gpus/gpus=0');
    // a payload without points (version 1 allows it): the labels
    const bare = [0, 1].map(i => ({ ...rank(i, []), point: {} }));
    expect(ranksLabel(bare)).toBe('hosts=0,hosts=1');
  });

  it('bounds the diff of a group and the label of a scattered set', () => {
    const many = Array.from({ length: 300 }, (_, i) => `line ${i}`);
    const ranks = [
      rank(0, many),
      rank(1, many),
      rank(
        2,
        many.map(l => l + '!')
      )
    ];
    const found = findOutliers(ranks);
    const diff = outlierDiff(found.majority!, found.outliers[0]);
    expect(diff).toHaveLength(MAX_DIFF_LINES + 1);
    expect(diff[MAX_DIFF_LINES]).toBe('… 403 more lines of diff');
    expect(lineKind(diff[0], 0)).toBe('file');
    expect(lineKind(diff[2], 2)).toBe('hunk');
    expect(lineKind(diff[3], 3)).toBe('del');
    expect(lineKind(diff[MAX_DIFF_LINES], MAX_DIFF_LINES)).toBe('note');
    // every even rank of 10,000 prints the same: its label is cut
    const even = Array.from({ length: 10000 }, (_, i) =>
      rank(i, [i % 2 ? `odd ${i}` : 'even'])
    );
    const groups = findOutliers(even);
    expect(groups.majority!.ranks).toHaveLength(5000);
    expect(groups.majority!.label.length).toBeLessThanOrEqual(
      MAX_LABEL_CHARS + 1
    );
    expect(groups.outliers).toHaveLength(5000);
  });

  it('finds the same groups in slices, pausing between them', async () => {
    const ranks = Array.from({ length: 5000 }, (_, i) =>
      rank(i, [i % 7 ? 'x'.repeat(100) : `odd ${i % 3}`])
    );
    let pauses = 0;
    const sliced = await findOutliersInSlices(ranks, () => {
      pauses++;
      return Promise.resolve();
    });
    const whole = findOutliers(ranks);
    expect(sliced.head).toEqual(whole.head);
    expect(sliced.outliers.map(g => g.label)).toEqual(
      whole.outliers.map(g => g.label)
    );
    // ~440,000 characters: a pause every SLICE_CHARS of them
    expect(pauses).toBeGreaterThanOrEqual(4);
  });

  it('keeps the groups with a failing rank for "failing only"', () => {
    const ranks = [
      rank(0, ['a']),
      rank(1, ['a']),
      rank(2, ['b'], 'failed'),
      rank(3, ['c'])
    ];
    const found = findOutliers(ranks);
    expect(found.outliers.map(g => g.label)).toEqual(['hosts=2', 'hosts=3']);
    expect(failingGroups(found.outliers).map(g => g.label)).toEqual([
      'hosts=2'
    ]);
    expect(groupBadge(found.outliers[0])).toEqual({
      text: 'rc=1',
      kind: 'failed'
    });
    const mixed = findOutliers([
      rank(0, ['a']),
      rank(1, ['b'], 'timed_out'),
      rank(2, ['b'])
    ]).majority!;
    expect(groupBadge(mixed)).toEqual({
      text: '1 timed out, 1 ok',
      kind: 'failed'
    });
  });
});
