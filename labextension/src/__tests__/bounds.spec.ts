/**
 * @jest-environment jsdom
 */
import {
  MAX_LINES,
  MAX_LINE_CHARS,
  MAX_RANKS,
  MIME_TYPE,
  PAGE_RANKS,
  formatDuration,
  moreText,
  omittedNotice,
  orderRanks,
  parseRunResult
} from '../model';
import { RunResultRenderer } from '../renderer';
import { truncatedNote } from '../contextModel';

function rank(i: number, status = 'ok', extra: Record<string, unknown> = {}) {
  return {
    label: `hosts=${i}`,
    mesh: 'hosts',
    point: { hosts: i },
    rank: i,
    status,
    returncode: status === 'ok' ? 0 : 1,
    duration: 0.5,
    lines: [['out', `line of ${i}`]],
    truncated: 0,
    ...extra
  };
}

function payload(ranks: unknown[], extra: Record<string, unknown> = {}) {
  return {
    version: 2,
    command: 'echo hi',
    mode: 'bash',
    target: 'mesh hosts',
    started: '',
    duration: 1,
    log_path: null,
    summary: { ok: ranks.length },
    ranks,
    run_id: 'r1',
    state: 'finished',
    ...extra
  };
}

function many(n: number, failingEvery = 0): unknown[] {
  return Array.from({ length: n }, (_, i) =>
    rank(
      i,
      failingEvery && i % failingEvery === failingEvery - 1 ? 'failed' : 'ok'
    )
  );
}

describe('parse bounds', () => {
  it('parses at most MAX_RANKS ranks, failing ones first, in order', () => {
    const ranks = many(MAX_RANKS + 5000);
    (ranks[MAX_RANKS + 4000] as any).status = 'failed';
    const result = parseRunResult(payload(ranks));
    expect(result.ranks.length).toBe(MAX_RANKS);
    expect(result.omitted).toBe(5000);
    expect(result.ranks.some(r => r.rank === MAX_RANKS + 4000)).toBe(true);
    const order = result.ranks.map(r => r.rank);
    expect(order).toEqual([...order].sort((a, b) => a - b));
  });

  it('keeps the last MAX_LINES lines and counts the rest as truncated', () => {
    const lines = Array.from({ length: MAX_LINES + 7 }, (_, i) => [
      'out',
      `${i}`
    ]);
    const result = parseRunResult(
      payload([rank(0, 'ok', { lines, truncated: 3 })])
    );
    expect(result.ranks[0].lines.length).toBe(MAX_LINES);
    expect(result.ranks[0].lines[MAX_LINES - 1][1]).toBe(`${MAX_LINES + 6}`);
    expect(result.ranks[0].truncated).toBe(10);
  });

  it('cuts long lines', () => {
    const long = 'x'.repeat(MAX_LINE_CHARS * 3);
    const result = parseRunResult(
      payload([rank(0, 'ok', { lines: [['out', long]] })])
    );
    expect(result.ranks[0].lines[0][1].length).toBe(MAX_LINE_CHARS + 1);
  });

  it('reads values outside the schema as unknown', () => {
    const result = parseRunResult(
      payload(
        [
          rank(0, 'ok', {
            duration: 1e308,
            returncode: 1.5,
            rank: -3,
            truncated: -2
          })
        ],
        { duration: -1, summary: { ok: -1, failed: 1e308, skipped: 2.5 } }
      )
    );
    expect(result.duration).toBeNull();
    expect(result.ranks[0].duration).toBeNull();
    expect(result.ranks[0].returncode).toBeNull();
    expect(result.ranks[0].rank).toBe(0);
    expect(result.ranks[0].truncated).toBe(0);
    expect(result.summary.ok).toBe(0);
    expect(result.summary.failed).toBe(0);
    expect(result.summary.skipped).toBe(0);
    expect(formatDuration(result.ranks[0].duration)).toBe('');
  });
});

describe('paging', () => {
  it('orders failing ranks first beyond one page', () => {
    const result = parseRunResult(payload(many(PAGE_RANKS * 3, 50)));
    const order = orderRanks(result.ranks, false);
    expect(order[0].status).toBe('failed');
    expect(order.length).toBe(PAGE_RANKS * 3);
    const small = parseRunResult(payload(many(10, 5)));
    expect(orderRanks(small.ranks, false).map(r => r.rank)).toEqual([
      0, 1, 2, 3, 4, 5, 6, 7, 8, 9
    ]);
  });

  it('says how many more there are', () => {
    expect(moreText(100, 100)).toBe('');
    expect(moreText(100, 150)).toBe('Show 50 more ranks (50 not shown)');
    expect(moreText(100, 100000)).toBe(
      'Show 100 more ranks (99,900 not shown)'
    );
    expect(omittedNotice(0)).toBe('');
    expect(omittedNotice(90000)).toContain('90,000 more ranks not read');
  });

  it('renders a bounded DOM for 100,000 ranks and pages on click', async () => {
    const renderer = new RunResultRenderer({
      mimeType: MIME_TYPE,
      sanitizer: {} as any,
      resolver: null,
      linkHandler: null,
      latexTypesetter: null
    });
    const data = payload(many(100000, 1000));
    await renderer.renderModel({ data: { [MIME_TYPE]: data } } as any);
    const node = renderer.node;
    expect(node.querySelectorAll('.jp-MonarchRun-rank').length).toBe(
      PAGE_RANKS
    );
    expect(node.querySelectorAll('*').length).toBeLessThan(2000);
    const more = node.querySelector('.jp-MonarchRun-more') as HTMLButtonElement;
    expect(more.textContent).toContain('9,900 not shown');
    more.click();
    expect(node.querySelectorAll('.jp-MonarchRun-rank').length).toBe(
      2 * PAGE_RANKS
    );
    expect(node.textContent).toContain('90,000 more ranks not read');
    const filter = node.querySelector('input') as HTMLInputElement;
    filter.checked = true;
    filter.dispatchEvent(new Event('change'));
    expect(node.querySelectorAll('.jp-MonarchRun-rank').length).toBe(100);
    expect(more.hidden).toBe(true);
    renderer.dispose();
  });
});

describe('sidebar response bounds', () => {
  it('notes a response the server cut', () => {
    expect(
      truncatedNote({ root: '', contexts: [], truncated: true })
    ).toContain('Not every context is listed');
    expect(truncatedNote({ root: '', contexts: [] })).toBe('');
    expect(truncatedNote(null)).toBe('');
  });
});

describe('rank lines', () => {
  it('show SGR colours as classes, not as raw [31m', async () => {
    const renderer = new RunResultRenderer({
      mimeType: MIME_TYPE,
      sanitizer: {} as any,
      resolver: null,
      linkHandler: null,
      latexTypesetter: null
    });
    const data = payload([
      rank(0, 'failed', {
        lines: [['err', '\x1b[31mboom\x1b[0m \x1b]0;t\x07']]
      })
    ]);
    await renderer.renderModel({ data: { [MIME_TYPE]: data } } as any);
    const line = renderer.node.querySelector('.jp-MonarchRun-line')!;
    expect(line.textContent).toBe('boom ');
    expect(line.querySelector('span.ansi-red-fg')!.textContent).toBe('boom');
    renderer.dispose();
  });
});
