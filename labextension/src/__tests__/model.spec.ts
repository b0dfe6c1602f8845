import {
  IRunResult,
  RunResultError,
  badgeKind,
  badgeText,
  filterRanks,
  formatDuration,
  initiallyOpen,
  attachLine,
  parseRunResult,
  runningNote,
  summaryText,
  truncatedNotice
} from '../model';

function payload(overrides: Record<string, unknown> = {}): any {
  return {
    version: 1,
    command: 'echo hi',
    mode: 'bash',
    target: 'mesh hosts (2 ranks)',
    started: '2026-11-30T15:00:00Z',
    duration: 1.23,
    log_path: '.monarch/runs/xyz.log',
    summary: { ok: 1, failed: 1, timed_out: 0, skipped: 0, interrupted: 0 },
    ranks: [
      {
        label: 'hosts=0',
        mesh: 'hosts',
        point: { hosts: 0 },
        rank: 0,
        status: 'ok',
        returncode: 0,
        duration: 1.2,
        lines: [['out', 'hello']],
        truncated: 0
      },
      {
        label: 'hosts=1',
        mesh: 'hosts',
        point: { hosts: 1 },
        rank: 1,
        status: 'failed',
        returncode: 2,
        duration: 1.1,
        lines: [
          ['out', 'hello'],
          ['err', 'warning: x']
        ],
        truncated: 5
      }
    ],
    ...overrides
  };
}

describe('parseRunResult', () => {
  it('accepts a version-1 payload', () => {
    const result: IRunResult = parseRunResult(payload());
    expect(result.command).toBe('echo hi');
    expect(result.ranks).toHaveLength(2);
    expect(result.ranks[1].lines[1]).toEqual(['err', 'warning: x']);
    expect(result.ranks[1].truncated).toBe(5);
    expect(result.summary.failed).toBe(1);
  });

  it('reads a version-1 payload as a finished run without id', () => {
    const result = parseRunResult(payload());
    expect(result.state).toBe('finished');
    expect(result.run_id).toBeNull();
    expect(runningNote(result)).toBe('');
  });

  it('accepts a version-2 payload written while the run went on', () => {
    const result = parseRunResult(
      payload({
        version: 2,
        run_id: '20261201-010203-abc123',
        state: 'running'
      })
    );
    expect(result.version).toBe(2);
    expect(result.state).toBe('running');
    expect(attachLine(result)).toBe('%remote attach 20261201-010203-abc123');
    expect(runningNote(result)).toBe(
      'Run 20261201-010203-abc123 was still running when saved — run %remote attach 20261201-010203-abc123 to follow it (its output so far, then live).'
    );
    const ended = parseRunResult(
      payload({ version: 2, run_id: 'x', state: 'finished' })
    );
    expect(runningNote(ended)).toBe('');
    const detached = parseRunResult(
      payload({ version: 2, run_id: 'x', state: 'running', detached: true })
    );
    expect(detached.detached).toBe(true);
    expect(runningNote(detached)).toBe(
      'Run x was started detached and may have ended since — run %remote attach x to see its output (live while it runs).'
    );
  });

  it('rejects other versions and non-objects', () => {
    expect(() => parseRunResult(payload({ version: 3 }))).toThrow(
      RunResultError
    );
    expect(() => parseRunResult(null)).toThrow(RunResultError);
    expect(() => parseRunResult([])).toThrow(RunResultError);
  });

  it('rejects an unknown status or a malformed line', () => {
    const badStatus = payload();
    badStatus.ranks[0].status = 'exploded';
    expect(() => parseRunResult(badStatus)).toThrow(/status/);
    const badLine = payload();
    badLine.ranks[0].lines = [['stdout', 'x']];
    expect(() => parseRunResult(badLine)).toThrow(/lines\[0\]/);
  });

  it('defaults optional fields', () => {
    const minimal = parseRunResult({
      version: 1,
      command: 'x',
      ranks: [{ label: 'r', status: 'running' }]
    });
    expect(minimal.duration).toBeNull();
    expect(minimal.log_path).toBeNull();
    expect(minimal.summary).toEqual({
      ok: 0,
      failed: 0,
      timed_out: 0,
      skipped: 0,
      interrupted: 0
    });
    expect(minimal.ranks[0]).toMatchObject({
      returncode: null,
      lines: [],
      truncated: 0,
      rank: 0,
      error: null
    });
  });
});

describe('filterRanks', () => {
  it('keeps failed, timed out and interrupted ranks when failing only', () => {
    const result = parseRunResult(
      payload({
        ranks: [
          'ok',
          'failed',
          'timed_out',
          'skipped',
          'interrupted',
          'running'
        ].map((status, i) => ({ label: `r${i}`, status }))
      })
    );
    expect(filterRanks(result.ranks, false)).toHaveLength(6);
    expect(filterRanks(result.ranks, true).map(r => r.status)).toEqual([
      'failed',
      'timed_out',
      'interrupted'
    ]);
  });
});

describe('initiallyOpen', () => {
  it('opens failing ranks always and others only in small runs', () => {
    const [ok, failed] = parseRunResult(payload()).ranks;
    expect(initiallyOpen(ok, 2)).toBe(true);
    expect(initiallyOpen(ok, 100)).toBe(false);
    expect(initiallyOpen(failed, 100)).toBe(true);
    expect(initiallyOpen({ ...ok, lines: [] }, 2)).toBe(false);
  });
});

describe('text helpers', () => {
  it('summarises the non-zero counts', () => {
    expect(summaryText(parseRunResult(payload()).summary)).toBe(
      '1 ok, 1 failed'
    );
    expect(
      summaryText({
        ok: 0,
        failed: 0,
        timed_out: 3,
        skipped: 0,
        interrupted: 0
      })
    ).toBe('3 timed out');
    expect(
      summaryText({
        ok: 0,
        failed: 0,
        timed_out: 0,
        skipped: 0,
        interrupted: 0
      })
    ).toBe('no ranks');
  });

  it('announces truncated lines', () => {
    expect(truncatedNotice(0)).toBe('');
    expect(truncatedNotice(1)).toBe('1 earlier line not shown');
    expect(truncatedNotice(42)).toBe('42 earlier lines not shown');
  });

  it('formats durations', () => {
    expect(formatDuration(null)).toBe('');
    expect(formatDuration(1.234)).toBe('1.23s');
    expect(formatDuration(125)).toBe('2m 05s');
  });

  it('labels and colours badges', () => {
    const [ok, failed] = parseRunResult(payload()).ranks;
    expect([badgeText(ok), badgeKind(ok)]).toEqual(['rc=0', 'ok']);
    expect([badgeText(failed), badgeKind(failed)]).toEqual(['rc=2', 'failed']);
    const running = { ...ok, status: 'running' as const, returncode: null };
    expect([badgeText(running), badgeKind(running)]).toEqual([
      'running',
      'other'
    ]);
  });
});
