/**
 * @jest-environment jsdom
 *
 * The run grid's anywidget front end (widgets/run.ts, built into monarch_jupyter/widgets/run.js) against a
 * model that behaves like anywidget's: synced values, change events, custom
 * messages.
 */
import { WRITES_PER_FRAME, formatSeconds, statusText } from '../../widgets/run';
import {
  FakeModel as GridModel,
  frame,
  gridView,
  nextFrame,
  settle
} from './gridTestUtil';

const TITLE = '%%remote mesh hosts (3 ranks)';

class FakeModel extends GridModel {
  constructor(data: Record<string, any>) {
    super({ title: TITLE, ...data });
  }
}

function tile(rank: number, status: string, extra: Record<string, any> = {}) {
  return {
    rank,
    label: `hosts=${rank}`,
    status,
    failing: ['failed', 'timed_out', 'interrupted'].includes(status),
    returncode: null,
    duration: null,
    started: null,
    error: null,
    ...extra
  };
}

function texts(root: HTMLElement, selector: string): string[] {
  return Array.from(root.querySelectorAll(selector)).map(
    node => node.textContent ?? ''
  );
}

describe('run grid helpers', () => {
  it('formats seconds and statuses', () => {
    expect(formatSeconds(null)).toBe('');
    expect(formatSeconds(4.25)).toBe('4.3s');
    expect(formatSeconds(125)).toBe('2m 05s');
    expect(statusText(tile(0, 'failed', { returncode: 3 }))).toBe(
      'failed · rc 3'
    );
    expect(statusText(tile(0, 'timed_out'))).toBe('timed out');
    expect(statusText(tile(0, 'running', { returncode: 0 }))).toBe('running');
  });
});

describe('run grid view', () => {
  const view = gridView();

  it('draws tiles, follows batches of lines and filters failing ranks', () => {
    const model = new FakeModel({
      tiles: [tile(0, 'running', { started: Date.now() / 1000 - 3 })],
      tails: { '0': [['out', 'early']] } // a view opened late starts from the tails
    });
    view.render(model);
    expect(view.root.classList).toContain('monarch-run-widget');
    expect(texts(view.root, '.monarch-run-title')).toEqual([
      '%%remote mesh hosts (3 ranks)'
    ]);
    expect(texts(view.root, '.monarch-run-last')).toEqual(['early']);
    expect(texts(view.root, '.monarch-run-elapsed')[0]).toMatch(/^3\.\ds$/);

    model.set('tiles', [
      tile(0, 'running'),
      tile(1, 'failed', { returncode: 3, error: null }),
      tile(2, 'ok', { returncode: 0, duration: 1.5 })
    ]);
    model.set('summary', '3 ranks: 1 running, 1 ok, 1 failed');
    model.emit('msg:custom', {
      kind: 'lines',
      lines: { '0': [['out', 'tick 1']], '1': [['err', 'boom']] },
      dropped: { '1': 7 }
    });
    frame();
    expect(texts(view.root, '.monarch-run-tile .monarch-run-label')).toEqual([
      'hosts=0',
      'hosts=1',
      'hosts=2'
    ]);
    const failed = view.root.querySelector<HTMLElement>(
      ".monarch-run-tile[data-rank='1']"
    )!;
    expect(failed.dataset.status).toBe('failed');
    expect(model.get('shown')).toBe(true); // the kernel stops streaming what the grid shows
    expect(failed.querySelector('.monarch-run-status')!.textContent).toBe(
      'failed · rc 3'
    );
    expect(texts(view.root, '.monarch-run-last')).toEqual([
      'tick 1',
      'boom',
      ''
    ]);
    expect(texts(view.root, '.monarch-run-summary')).toEqual([
      '3 ranks: 1 running, 1 ok, 1 failed'
    ]);

    // "failing only" keeps the tiles the kernel side marked failing
    const filter = view.root.querySelector<HTMLInputElement>(
      '.monarch-run-filter input'
    )!;
    filter.checked = true;
    filter.dispatchEvent(new Event('change'));
    frame();
    expect(model.get('failing_only')).toBe(true);
    expect(texts(view.root, '.monarch-run-tile .monarch-run-label')).toEqual([
      'hosts=1'
    ]);

    // clicking a tile shows its output, with the lines not received counted
    failed.click();
    frame();
    expect(model.get('selected')).toBe(1);
    expect(model.saved).toBe(3); // shown (after the first draw), failing_only, selected
    expect(texts(view.root, '.monarch-run-detailHead')).toEqual([
      'hosts=1 · failed · rc 3'
    ]);
    expect(texts(view.root, '.monarch-run-dropped')).toEqual([
      '7 earlier lines not shown'
    ]);
    expect(texts(view.root, '.monarch-run-output .monarch-run-line')).toEqual([
      'boom'
    ]);
  });

  it('keeps a bounded buffer per rank and stops following when finished', () => {
    const model = new FakeModel({ tiles: [tile(0, 'running')], selected: 0 });
    view.render(model);
    const lines = Array.from({ length: 600 }, (_, i) => ['out', `l${i}`]);
    model.emit('msg:custom', { kind: 'lines', lines: { '0': lines } });
    model.emit('msg:custom', { kind: 'other' }); // ignored
    frame();
    const shown = texts(view.root, '.monarch-run-output .monarch-run-line');
    expect(shown).toHaveLength(500);
    expect(shown[499]).toBe('l599');
    expect(texts(view.root, '.monarch-run-dropped')).toEqual([
      '100 earlier lines not shown'
    ]);
    const stop =
      view.root.querySelector<HTMLButtonElement>('.monarch-run-stop')!;
    expect(stop.disabled).toBe(false);
    model.set('tiles', [tile(0, 'interrupted', { returncode: -2 })]);
    model.set('finished', true);
    frame();
    expect(stop.disabled).toBe(true);
    expect(view.root.classList).toContain('monarch-run-finished');
    expect(
      view.root.querySelector<HTMLElement>('.monarch-run-tile')!.dataset.status
    ).toBe('interrupted');
    view.unmount();
    expect(model.listeners()).toBe(0); // the view lets go of the model
  });

  it('Stop interrupts the kernel through the server (as the toolbar does)', async () => {
    const calls: [string, any][] = [];
    (global as any).fetch = (url: string, init: any) => {
      calls.push([url, init]);
      return Promise.resolve({ ok: true, status: 204 });
    };
    document.cookie = '_xsrf=abc%3D';
    const model = new FakeModel({
      tiles: [tile(0, 'running')],
      kernel_id: 'k 1'
    });
    view.render(model);
    view.root.querySelector<HTMLButtonElement>('.monarch-run-stop')!.click();
    await Promise.resolve();
    expect(calls).toHaveLength(1);
    expect(calls[0][0]).toBe('/api/kernels/k%201/interrupt');
    expect(calls[0][1].method).toBe('POST');
    expect(calls[0][1].headers['X-XSRFToken']).toBe('abc=');
    expect(texts(view.root, '.monarch-run-note')).toEqual(['stopping…']);
    delete (global as any).fetch;
  });

  it('keeps the tiles on the page and writes only what changed in them', () => {
    const model = new FakeModel({
      tiles: [tile(0, 'running'), tile(1, 'running'), tile(2, 'running')],
      selected: 1
    });
    view.render(model);
    const nodes = () =>
      Array.from(view.root.querySelectorAll<HTMLElement>('.monarch-run-tile'));
    const before = nodes();
    const output = view.root.querySelector('.monarch-run-output');
    const added: Node[] = [];
    const watch = new MutationObserver(records =>
      records.forEach(r => added.push(...Array.from(r.addedNodes)))
    );
    watch.observe(view.root.querySelector('.monarch-run-grid')!, {
      childList: true,
      subtree: true,
      characterData: true
    });
    model.emit('msg:custom', { kind: 'lines', lines: { '0': [['out', 'a']] } });
    frame();
    watch.takeRecords().forEach(r => added.push(...Array.from(r.addedNodes)));
    expect(nodes()).toEqual(before); // the same elements, not new ones
    expect(texts(view.root, '.monarch-run-last')).toEqual(['a', '', '']);
    // one text node written: rank 0's last line; no tile, span or other text rebuilt
    expect(added.map(n => n.textContent)).toEqual(['a']);
    // rank 1's pane is shown: lines of rank 0 leave it as it was
    expect(view.root.querySelector('.monarch-run-output')).toBe(output);

    // the kernel's order changes (a rank failed: failing first): the same nodes, moved
    model.set('tiles', [
      tile(2, 'failed', { returncode: 1 }),
      tile(0, 'running'),
      tile(1, 'running')
    ]);
    frame();
    expect(nodes()).toEqual([before[2], before[0], before[1]]);
    expect(before[2].dataset.status).toBe('failed');
    expect(before[2].classList).toContain('monarch-run-failed');
    expect(before[2].classList).not.toContain('monarch-run-running');
    // the shown rank's new lines are appended to its pane, not drawn anew
    model.emit('msg:custom', { kind: 'lines', lines: { '1': [['out', 'b']] } });
    frame();
    const first = view.root.querySelector(
      '.monarch-run-output .monarch-run-line'
    );
    model.emit('msg:custom', { kind: 'lines', lines: { '1': [['err', 'c']] } });
    frame();
    expect(view.root.querySelector('.monarch-run-output')).toBe(output);
    expect(texts(view.root, '.monarch-run-output .monarch-run-line')).toEqual([
      'b',
      'c'
    ]);
    expect(
      view.root.querySelector('.monarch-run-output .monarch-run-line')
    ).toBe(first);
    watch.disconnect();
  });

  it('rewrites a bounded number of tiles a frame, the rest in the next ones, then stops', () => {
    const n = 2 * WRITES_PER_FRAME + 20;
    const ranks = Array.from({ length: n }, (_, r) => r);
    const model = new FakeModel({ tiles: ranks.map(r => tile(r, 'running')) });
    view.render(model);
    settle();
    const shown = () =>
      Array.from(
        view.root.querySelectorAll<HTMLElement>('.monarch-run-tile')
      ).filter(
        node =>
          node.querySelector('.monarch-run-last')?.textContent ===
          `x${node.dataset.rank}`
      ).length;
    const lines: Record<string, any> = {};
    ranks.forEach(r => (lines[String(r)] = [['out', `x${r}`]]));
    model.emit('msg:custom', { kind: 'lines', lines });
    nextFrame();
    expect(shown()).toBe(WRITES_PER_FRAME);
    nextFrame();
    expect(shown()).toBe(2 * WRITES_PER_FRAME);
    nextFrame();
    expect(shown()).toBe(n);
    const frames = jest.spyOn(window, 'requestAnimationFrame');
    frame();
    frame();
    expect(frames).not.toHaveBeenCalled(); // every tile is up to date: no frame asked for
    frames.mockRestore();

    // what must show at once does, whatever the budget: a changed status, the clicked tile
    const last = n - 1;
    model.emit('msg:custom', { kind: 'lines', lines }); // every tile due again
    model.set(
      'tiles',
      ranks.map(r => tile(r, r === last ? 'failed' : 'running'))
    );
    const node = (rank: number) =>
      view.root.querySelector<HTMLElement>(`[data-rank="${rank}"]`)!;
    node(last - 1).click();
    nextFrame();
    expect(node(last).dataset.status).toBe('failed');
    expect(node(last - 1).classList).toContain('monarch-run-selected');
  });

  it('works from the keyboard: tiles are buttons, Enter and Space toggle', () => {
    const model = new FakeModel({
      tiles: [
        tile(0, 'ok', { returncode: 0 }),
        tile(1, 'failed', { returncode: 3 })
      ],
      tails: { '1': [['err', '\x1b[31mboom\x1b[0m']] }
    });
    view.render(model);
    const tiles = () =>
      Array.from(view.root.querySelectorAll<HTMLElement>('.monarch-run-tile'));
    expect(tiles().map(t => [t.tabIndex, t.getAttribute('role')])).toEqual([
      [0, 'button'],
      [0, 'button']
    ]);
    expect(tiles()[1].getAttribute('aria-label')).toContain(
      'hosts=1: failed · rc 3'
    );
    tiles()[1].focus();
    tiles()[1].dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter' }));
    frame();
    expect(model.get('selected')).toBe(1);
    expect(tiles()[1].getAttribute('aria-pressed')).toBe('true');
    expect(document.activeElement).toBe(tiles()[1]); // focus kept across the redraw
    expect(
      view.root.querySelector('.monarch-run-output .ansi-red-fg')!.textContent
    ).toBe('boom');
    tiles()[1].dispatchEvent(new KeyboardEvent('keydown', { key: ' ' }));
    frame();
    expect(model.get('selected')).toBe(-1);
  });
});
