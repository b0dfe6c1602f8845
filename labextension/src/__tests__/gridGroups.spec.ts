/**
 * @jest-environment jsdom
 *
 * The run grid's grouped tiles, Stacks button, resources and bounded DOM
 * (widgets/run.ts, built into monarch_jupyter/widgets/run.js) against a model that behaves like
 * anywidget's.
 */
import { expandRuns, formatBytes, usageText } from '../../widgets/run';
import { FakeModel, frame, gridView, settle } from './gridTestUtil';

class Model extends FakeModel {
  constructor(data: Record<string, any>) {
    super({
      grouped: true,
      groups: [],
      can_stacks: true,
      can_usage: true,
      ...data
    });
  }
}

function tile(rank: number, status: string) {
  return {
    rank,
    label: `hosts=${rank}`,
    status,
    failing: status === 'failed',
    returncode: status === 'failed' ? 1 : null,
    duration: null,
    started: null,
    error: null,
    quiet_since: null
  };
}

function group(label: string, ranks: number[][], status: string, extra = {}) {
  const members = expandRuns(ranks);
  return {
    label,
    ranks,
    count: members.length,
    rank: members[0],
    status,
    failing: status === 'failed',
    quiet: false,
    idle: false,
    ...extra
  };
}

describe('grid helpers', () => {
  it('expands runs and formats resources', () => {
    expect(
      expandRuns([
        [0, 2],
        [5, 5]
      ])
    ).toEqual([0, 1, 2, 5]);
    expect(formatBytes(310e6)).toBe('310 MB');
    expect(formatBytes(1.2e9)).toBe('1.2 GB');
    expect(usageText({ cpu: 98.4, rss: 1.2e9, gpu_mib: 900 })).toBe(
      'cpu 98% · 1.2 GB · gpu 900 MiB'
    );
    expect(usageText(undefined)).toBe('');
  });
});

describe('grouped grid', () => {
  const view = gridView();
  const labels = () =>
    Array.from(
      view.root.querySelectorAll('.monarch-run-tile .monarch-run-label')
    ).map(n => n.textContent);

  it('draws one tile per group, failing first, and unfolds when told', () => {
    const tiles = Array.from({ length: 9 }, (_, i) =>
      tile(i, i === 7 ? 'failed' : 'running')
    );
    const model = new Model({
      tiles,
      groups: [
        group('hosts=7', [[7, 7]], 'failed'),
        group(
          'hosts=[0-6,8] (8)',
          [
            [0, 6],
            [8, 8]
          ],
          'running'
        )
      ]
    });
    view.render(model);
    expect(labels()).toEqual(['hosts=7', 'hosts=[0-6,8] (8)']);
    const groupTile =
      view.root.querySelector<HTMLElement>('.monarch-run-group')!;
    expect(groupTile.dataset.count).toBe('8');
    // clicking the group shows its first member's output, under the group's label
    groupTile.click();
    frame();
    expect(
      view.root.querySelector('.monarch-run-detailHead')!.textContent
    ).toContain('hosts=[0-6,8] (8), identical so far');
    // ungrouped: one tile per rank, failing first
    const box = view.root.querySelector<HTMLInputElement>(
      '.monarch-run-groupToggle input'
    )!;
    box.checked = false;
    box.dispatchEvent(new Event('change'));
    frame();
    expect(labels()).toHaveLength(9);
  });

  it("asks for stacks with the group's ranks and shows the answer", () => {
    const model = new Model({
      tiles: [tile(0, 'running'), tile(1, 'running'), tile(2, 'running')],
      groups: [group('hosts=[0-2] (3)', [[0, 2]], 'running')]
    });
    view.render(model);
    view.root.querySelector<HTMLElement>('.monarch-run-stacksButton')!.click();
    const request = model.sent.find(m => m.kind === 'stacks');
    expect(request.ranks).toEqual([0, 1, 2]);
    expect(model.get('selected')).toBe(-1); // the button does not select the tile
    expect(
      view.root.querySelector('.monarch-run-stacks')!.textContent
    ).toContain('asking the hosts');
    model.emit('msg:custom', {
      kind: 'stacks',
      id: request.id,
      text: 'hosts=[0-2] (3):\n    in allreduce (train.py:88)'
    });
    expect(
      view.root.querySelector('.monarch-run-stacksText')!.textContent
    ).toContain('allreduce');
    model.emit('msg:custom', { kind: 'stacks', id: 'other', error: 'x' });
    expect(view.root.querySelectorAll('.monarch-run-stacksError')).toHaveLength(
      0
    );
  });

  it('polls resources while running and flags an idle rank', () => {
    const model = new Model({
      grouped: false,
      tiles: [tile(0, 'running'), tile(1, 'running')]
    });
    view.render(model);
    jest.advanceTimersByTime(2100);
    const asks = model.sent.filter(m => m.kind === 'usage');
    expect(asks).toHaveLength(1);
    jest.advanceTimersByTime(2100); // one request in flight at a time
    expect(model.sent.filter(m => m.kind === 'usage')).toHaveLength(1);
    model.emit('msg:custom', {
      kind: 'usage',
      id: asks[0].id,
      ranks: {
        '0': { cpu: 99, rss: 2e8, gpu_mib: null, idle: false },
        '1': { cpu: 0, rss: 1e8, gpu_mib: null, idle: true }
      }
    });
    frame();
    const rank1 = view.root.querySelector<HTMLElement>(
      ".monarch-run-tile[data-rank='1']"
    )!;
    expect(rank1.classList.contains('monarch-run-quiet')).toBe(true);
    expect(rank1.querySelector('.monarch-run-status')!.textContent).toBe(
      'idle (0% cpu)'
    );
    expect(
      view.root.querySelector(
        ".monarch-run-tile[data-rank='0'] .monarch-run-usage"
      )!.textContent
    ).toBe('cpu 99% · 200 MB');
    model.set('finished', true);
    jest.advanceTimersByTime(4200); // a finished run is not sampled
    expect(model.sent.filter(m => m.kind === 'usage')).toHaveLength(1);
  });

  it('keeps the DOM bounded at 4,096 ungrouped ranks', () => {
    const tiles = Array.from({ length: 4096 }, (_, i) =>
      tile(i, i === 4000 ? 'failed' : 'running')
    );
    const model = new Model({ tiles, grouped: false, can_usage: false });
    view.render(model);
    // made a few dozen a frame: the first frame holds the first tiles, in order
    expect(view.root.querySelectorAll('.monarch-run-tile').length).toBeLessThan(
      200
    );
    expect(labels()[0]).toBe('hosts=4000');
    settle();
    expect(view.root.querySelectorAll('.monarch-run-tile')).toHaveLength(200);
    expect(labels()[0]).toBe('hosts=4000'); // failing first
    const more =
      view.root.querySelector<HTMLButtonElement>('.monarch-run-more')!;
    expect(more.hidden).toBe(false);
    more.click();
    settle();
    expect(view.root.querySelectorAll('.monarch-run-tile')).toHaveLength(400);
  });

  it('draws the page the kernel sent, asks for more, and takes a tail anew', () => {
    // the kernel sends one page (failing first) of 4,096 and the selected tile aside
    const page = [
      tile(4000, 'failed'),
      ...Array.from({ length: 199 }, (_, i) => tile(i, 'running'))
    ];
    const model = new Model({
      tiles: page,
      tile_count: 4096,
      grouped: false,
      can_usage: false,
      selected: 3000,
      detail: tile(3000, 'running')
    });
    view.render(model);
    settle();
    expect(view.root.querySelectorAll('.monarch-run-tile')).toHaveLength(200);
    expect(labels()[0]).toBe('hosts=4000');
    const more =
      view.root.querySelector<HTMLButtonElement>('.monarch-run-more')!;
    expect(more.textContent).toContain('3896 more tiles');
    more.click();
    expect(model.get('limit')).toBe(400); // the kernel sends the next page
    // the selected rank is not drawn: its detail comes from `detail`, its lines as a tail
    model.emit('msg:custom', {
      kind: 'lines',
      lines: {},
      dropped: {},
      tails: {
        '3000': [
          ['out', 'old'],
          ['out', 'latest']
        ]
      },
      earlier: { '3000': 7 }
    });
    frame();
    const detail = view.root.querySelector('.monarch-run-detail')!;
    expect(detail.textContent).toContain('hosts=3000');
    expect(detail.textContent).toContain('latest');
    expect(detail.textContent).toContain('7 earlier lines not shown');
    model.emit('msg:custom', {
      kind: 'lines',
      lines: { '3000': [['out', 'next']] },
      dropped: {}
    });
    frame();
    expect(detail.textContent).toContain('next');
  });
});
