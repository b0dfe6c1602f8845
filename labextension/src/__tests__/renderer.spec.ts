/**
 * @jest-environment jsdom
 */
import { RunResultRenderer } from '../renderer';
import { MIME_TYPE } from '../model';

function render(data: unknown): Promise<RunResultRenderer> {
  const renderer = new RunResultRenderer({
    mimeType: MIME_TYPE,
    sanitizer: {} as any,
    resolver: null,
    linkHandler: null,
    latexTypesetter: null
  });
  const model = { data: { [MIME_TYPE]: data } } as any;
  return renderer.renderModel(model).then(() => renderer);
}

const data = {
  version: 1,
  command: 'echo hi',
  mode: 'bash',
  target: 'mesh hosts (2 ranks)',
  duration: 1.23,
  summary: { ok: 1, failed: 1 },
  ranks: [
    {
      label: 'hosts=0',
      status: 'ok',
      returncode: 0,
      lines: [['out', 'hello']]
    },
    {
      label: 'hosts=1',
      status: 'failed',
      returncode: 1,
      lines: [['err', 'boom']],
      truncated: 3,
      error: 'worker died'
    }
  ]
};

describe('RunResultRenderer', () => {
  it('draws a streamed result without its lines or the cell source', async () => {
    const streamed = {
      ...data,
      streamed: true,
      own_cell: true,
      ranks: data.ranks.map(rank => ({ ...rank, lines: [], truncated: 0 }))
    };
    const node = (await render(streamed)).node;
    // the lines are the cell's stream above, the source its input: neither is repeated
    expect(node.querySelector('.jp-MonarchRun-command')).toBeNull();
    expect(node.querySelector('.jp-MonarchRun-lines')).toBeNull();
    expect(node.querySelector('.jp-MonarchRun-truncated')).toBeNull();
    expect(node.querySelector('.jp-MonarchRun-meta')!.textContent).toBe(
      'mesh hosts (2 ranks) · 1 ok, 1 failed · 1.23s'
    );
    // the failing rank only, with its code and error
    const rows = node.querySelectorAll('.jp-MonarchRun-streamedRanks > *');
    expect(rows).toHaveLength(1);
    expect(rows[0].textContent).toContain('hosts=1');
    expect(rows[0].textContent).toContain('rc=1');
    expect(rows[0].textContent).toContain('worker died');
  });

  it('renders header, rank panels, stderr and truncation notice', async () => {
    const node = (await render(data)).node;
    expect(node.querySelector('.jp-MonarchRun-command')!.textContent).toBe(
      'echo hi'
    );
    expect(node.querySelector('.jp-MonarchRun-meta')!.textContent).toBe(
      'mesh hosts (2 ranks) · 1 ok, 1 failed · 1.23s'
    );
    expect(node.querySelectorAll('.jp-MonarchRun-rank')).toHaveLength(2);
    expect(node.querySelector('.jp-MonarchRun-err')!.textContent).toBe('boom');
    expect(node.querySelector('.jp-MonarchRun-badge-failed')!.textContent).toBe(
      'rc=1'
    );
    expect(node.querySelector('.jp-MonarchRun-rankError')!.textContent).toBe(
      'worker died'
    );
    expect(node.querySelector('.jp-MonarchRun-truncated')!.textContent).toBe(
      '3 earlier lines not shown'
    );
  });

  it('filters to failing ranks when the checkbox is ticked', async () => {
    const node = (await render(data)).node;
    const checkbox = node.querySelector('input') as HTMLInputElement;
    checkbox.checked = true;
    checkbox.dispatchEvent(new Event('change'));
    const labels = Array.from(
      node.querySelectorAll('.jp-MonarchRun-label'),
      e => e.textContent
    );
    expect(labels).toEqual(['hosts=1']);
  });

  it('says a run saved mid-run was still running, with the attach line', async () => {
    const renderer = await render({
      ...data,
      version: 2,
      run_id: '20261201-010203-abc123',
      state: 'running'
    });
    const node = renderer.node;
    expect(renderer.hasClass('jp-MonarchRun-isRunning')).toBe(true);
    expect(
      node.querySelector('.jp-MonarchRun-runningNote')!.textContent
    ).toMatch(/^Run 20261201-010203-abc123 was still running when saved/);
    expect(node.querySelector('.jp-MonarchRun-attach')!.textContent).toBe(
      '%remote attach 20261201-010203-abc123'
    );
    expect(node.querySelectorAll('.jp-MonarchRun-rank')).toHaveLength(2);
    // a run that had not ended: every rank's status, not a summary of final ones
    expect(node.querySelector('.jp-MonarchRun-meta')!.textContent).toBe(
      'mesh hosts (2 ranks) · 2 ranks: 1 ok, 1 failed · 1.23s'
    );
    const pending = await render({
      ...data,
      version: 2,
      run_id: 'r1',
      state: 'running',
      duration: null,
      ranks: data.ranks.map(r => ({ ...r, status: 'pending', lines: [] }))
    });
    // written at the run's start: no stale "2 pending" beside the note
    expect(pending.node.querySelector('.jp-MonarchRun-meta')!.textContent).toBe(
      'mesh hosts (2 ranks)'
    );
    expect(pending.node.querySelector('.jp-MonarchRun-ranks')).toBeNull();
    // the same renderer re-rendered with the ended run: no note any more
    const ended = {
      data: {
        [MIME_TYPE]: { ...data, version: 2, run_id: 'x', state: 'finished' }
      }
    } as any;
    await renderer.renderModel(ended);
    expect(renderer.hasClass('jp-MonarchRun-isRunning')).toBe(false);
    expect(node.querySelector('.jp-MonarchRun-running')).toBeNull();
  });

  it('renders a version-1 payload as before: no running note', async () => {
    const renderer = await render(data);
    expect(renderer.node.querySelector('.jp-MonarchRun-running')).toBeNull();
    expect(renderer.hasClass('jp-MonarchRun-isRunning')).toBe(false);
  });

  it('shows each outlier as a diff from the majority when "diff to majority" is ticked', async () => {
    const ranks = Array.from({ length: 130 }, (_, i) => ({
      label: `hosts=${i}`,
      mesh: 'hosts',
      point: { hosts: i },
      rank: i,
      status: i === 7 ? 'failed' : 'ok',
      returncode: i === 7 ? 1 : 0,
      lines: [
        ['out', 'step 1'],
        ['out', i === 7 ? 'loss nan' : i > 20 ? `loss ${i}` : 'loss 0.5'],
        ['out', 'step 2']
      ]
    }));
    const node = (await render({ ...data, ranks })).node;
    const [failingOnly, diff] = Array.from(
      node.querySelectorAll('input')
    ) as HTMLInputElement[];
    expect(diff.parentElement!.textContent).toBe(' diff to majority');
    diff.checked = true;
    diff.dispatchEvent(new Event('change'));
    expect(node.querySelector('.jp-MonarchRun-diffHead')!.textContent).toBe(
      '--diff: hosts=[0-6,8-20] (20) agree; 110 outliers'
    );
    const panels = node.querySelectorAll('.jp-MonarchRun-outlier');
    // the majority (closed) and one page of outlier groups
    expect(panels).toHaveLength(101);
    expect(
      panels[0].querySelector('.jp-MonarchRun-lines')!.childElementCount
    ).toBe(0);
    const first = panels[1] as HTMLDetailsElement;
    expect(first.open).toBe(true);
    expect(
      Array.from(
        first.querySelectorAll('.jp-MonarchRun-line'),
        l => l.textContent
      )
    ).toEqual([
      '--- hosts=[0-6,8-20] (20)',
      '+++ hosts=7',
      '@@ -1,3 +1,3 @@',
      ' step 1',
      '-loss 0.5',
      '+loss nan',
      ' step 2'
    ]);
    expect(first.querySelector('.jp-MonarchRun-diff-add')!.textContent).toBe(
      '+loss nan'
    );
    expect(
      first.querySelector('.jp-MonarchRun-badge-failed')!.textContent
    ).toBe('rc=1');
    // closed panels draw their diff when opened
    const later = panels[20] as HTMLDetailsElement;
    expect(later.open).toBe(false);
    expect(later.querySelectorAll('.jp-MonarchRun-line')).toHaveLength(0);
    later.open = true;
    later.dispatchEvent(new Event('toggle'));
    expect(later.querySelectorAll('.jp-MonarchRun-line')).toHaveLength(7);
    const more = node.querySelector('.jp-MonarchRun-more') as HTMLButtonElement;
    expect(more.textContent).toBe('Show 10 more outliers (10 not shown)');
    more.click();
    expect(node.querySelectorAll('.jp-MonarchRun-outlier')).toHaveLength(111);
    expect(more.hidden).toBe(true);
    // with "failing only": the groups with a failing rank
    failingOnly.checked = true;
    failingOnly.dispatchEvent(new Event('change'));
    expect(
      Array.from(
        node.querySelectorAll('.jp-MonarchRun-outlier .jp-MonarchRun-label'),
        l => l.textContent
      )
    ).toEqual(['majority: hosts=[0-6,8-20] (20)', 'hosts=7']);
    // off again: the rank panels
    diff.checked = false;
    diff.dispatchEvent(new Event('change'));
    expect(node.querySelector('.jp-MonarchRun-diffHead')).toBeNull();
    expect(
      Array.from(
        node.querySelectorAll('.jp-MonarchRun-label'),
        l => l.textContent
      )
    ).toEqual(['hosts=7']);
  });

  it('groups many ranks in slices, then draws the diff if still asked for', async () => {
    const ranks = Array.from({ length: 3000 }, (_, i) => ({
      label: `hosts=${i}`,
      mesh: 'hosts',
      point: { hosts: i },
      rank: i,
      status: 'ok',
      returncode: 0,
      lines: [['out', (i === 42 ? 'odd ' : 'same ') + 'x'.repeat(60)]]
    }));
    const node = (await render({ ...data, ranks })).node;
    const diff = node.querySelectorAll('input')[1] as HTMLInputElement;
    diff.checked = true;
    diff.dispatchEvent(new Event('change'));
    expect(node.querySelector('.jp-MonarchRun-empty')!.textContent).toBe(
      'Comparing 3,000 ranks…'
    );
    expect(node.querySelector('.jp-MonarchRun-diffHead')).toBeNull();
    // toggled off and on before it is done: one diff view, drawn once
    diff.checked = false;
    diff.dispatchEvent(new Event('change'));
    diff.checked = true;
    diff.dispatchEvent(new Event('change'));
    for (let i = 0; i < 20; i++) {
      await new Promise(resolve => setTimeout(resolve, 0));
    }
    expect(node.querySelectorAll('.jp-MonarchRun-diffHead')).toHaveLength(1);
    expect(node.querySelector('.jp-MonarchRun-diffHead')!.textContent).toBe(
      '--diff: hosts=[0-41,43-2999] (2999) agree; 1 outlier'
    );
    expect(node.querySelector('.jp-MonarchRun-empty')).toBeNull();
    // off while grouping: the rank panels stay
    const again = (await render({ ...data, ranks })).node;
    const box = again.querySelectorAll('input')[1] as HTMLInputElement;
    box.checked = true;
    box.dispatchEvent(new Event('change'));
    box.checked = false;
    box.dispatchEvent(new Event('change'));
    for (let i = 0; i < 20; i++) {
      await new Promise(resolve => setTimeout(resolve, 0));
    }
    expect(again.querySelector('.jp-MonarchRun-diffHead')).toBeNull();
    expect(again.querySelectorAll('.jp-MonarchRun-rank')).toHaveLength(100);
  });

  it('offers no diff for one rank and says when all ranks agree', async () => {
    const one = (await render({ ...data, ranks: [data.ranks[0]] })).node;
    expect(one.querySelectorAll('input')).toHaveLength(1);
    const same = { ...data.ranks[0], lines: [['out', 'x']] };
    const node = (
      await render({ ...data, ranks: [same, { ...same, label: 'hosts=1' }] })
    ).node;
    const diff = node.querySelectorAll('input')[1] as HTMLInputElement;
    diff.checked = true;
    diff.dispatchEvent(new Event('change'));
    expect(node.querySelector('.jp-MonarchRun-diffHead')!.textContent).toBe(
      '--diff: all 2 ranks printed the same'
    );
    expect(node.querySelector('.jp-MonarchRun-outlier')).toBeNull();
    expect(node.querySelector('.jp-MonarchRun-empty')).toBeNull();
  });

  it('shows an error for an invalid payload', async () => {
    const node = (await render({ version: 99 })).node;
    expect(node.textContent).toMatch(/Cannot show run result/);
  });
});
