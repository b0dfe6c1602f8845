/**
 * @jest-environment jsdom
 */
import { Widget } from '@lumino/widgets';

import { MonarchPanel, POLL_MS } from '../panel';

const response = {
  root: '',
  contexts: [
    {
      name: 'default',
      dir: '.monarch/default',
      active: true,
      state: 'running',
      status: {
        job_class: 'ProcessJob',
        apply_id: 'uuid-1',
        meshes: [{ name: 'hosts', hosts: 2, live_workers: 2 }],
        urls: {},
        updated: 'now'
      }
    },
    {
      name: 'bare',
      dir: '.monarch/bare',
      active: false,
      state: 'unknown',
      status: null
    }
  ]
};

describe('MonarchPanel', () => {
  it('lists contexts, marks the active one and shows details on click', async () => {
    const panel = new MonarchPanel(() => Promise.resolve(response));
    await panel.refresh();
    const items = panel.node.querySelectorAll('.jp-MonarchPanel-item');
    expect(items).toHaveLength(2);
    expect(items[0].classList.contains('jp-MonarchPanel-active')).toBe(true);
    expect(items[1].classList.contains('jp-MonarchPanel-active')).toBe(false);
    (items[0] as HTMLElement).click();
    const details = panel.node.querySelector('.jp-MonarchPanel-details')!;
    expect(details.textContent).toContain('uuid-1');
    expect(details.textContent).toContain('hosts ×2 (2 live)');
    panel.dispose();
  });

  it('lists a context’s running runs with the attach line to copy', async () => {
    const withRuns = JSON.parse(JSON.stringify(response));
    withRuns.contexts[0].runs = [
      {
        id: '20261201-010203-abc123',
        command: 'sleep 600',
        target: 'mesh hosts (2 ranks)',
        started: 1764550923,
        state: 'running',
        attach: '%remote attach 20261201-010203-abc123'
      }
    ];
    const writes: string[] = [];
    Object.assign(navigator, {
      clipboard: {
        writeText: (t: string) => (writes.push(t), Promise.resolve())
      }
    });
    const panel = new MonarchPanel(() => Promise.resolve(withRuns));
    await panel.refresh();
    const runs = panel.node.querySelectorAll('.jp-MonarchPanel-run');
    expect(runs).toHaveLength(1);
    const run = runs[0] as HTMLElement;
    expect(run.dataset.run).toBe('20261201-010203-abc123');
    expect(run.querySelector('.jp-MonarchPanel-runCommand')!.textContent).toBe(
      'sleep 600'
    );
    expect(run.querySelector('.jp-MonarchPanel-runMeta')!.textContent).toMatch(
      /^mesh hosts \(2 ranks\) · started \d{4}-/
    );
    expect(run.querySelector('.jp-MonarchPanel-attach')!.textContent).toBe(
      '%remote attach 20261201-010203-abc123'
    );
    (run.querySelector('.jp-MonarchPanel-copy') as HTMLElement).click();
    expect(writes).toEqual(['%remote attach 20261201-010203-abc123']);
    // copying is not a click on the context: its details stay closed
    expect(
      panel.node.querySelector('.jp-MonarchPanel-detailsTitle')
    ).toBeNull();
    // the context without runs lists none
    expect(
      panel.node
        .querySelectorAll('.jp-MonarchPanel-item')[1]
        .querySelector('.jp-MonarchPanel-runs')
    ).toBeNull();
    panel.dispose();
  });

  it('reports fetch errors', async () => {
    const panel = new MonarchPanel(() => Promise.reject(new Error('403')));
    await panel.refresh();
    expect(panel.node.textContent).toContain(
      'Cannot list contexts: Error: 403'
    );
    panel.dispose();
  });

  it('polls while visible and stops when hidden', async () => {
    jest.useFakeTimers();
    let calls = 0;
    const panel = new MonarchPanel(() => {
      calls++;
      return Promise.resolve(response);
    });
    Widget.attach(panel, document.body);
    await jest.advanceTimersByTimeAsync(POLL_MS * 2 + 10);
    expect(calls).toBe(3);
    panel.hide();
    await jest.advanceTimersByTimeAsync(POLL_MS * 3);
    expect(calls).toBe(3);
    panel.show();
    await jest.advanceTimersByTimeAsync(10);
    expect(calls).toBe(4);
    panel.dispose();
    jest.useRealTimers();
  });

  it('works from the keyboard: a context header is a button', async () => {
    const panel = new MonarchPanel(() => Promise.resolve(response));
    document.body.appendChild(panel.node);
    await panel.refresh();
    const head = panel.node.querySelector<HTMLElement>(
      '.jp-MonarchPanel-itemHead'
    )!;
    expect(head.tabIndex).toBe(0);
    expect(head.getAttribute('role')).toBe('button');
    expect(head.getAttribute('aria-label')).toBe(
      'context default: running, active'
    );
    head.focus();
    head.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter' }));
    expect(
      panel.node.querySelector('.jp-MonarchPanel-detailsTitle')!.textContent
    ).toBe('default');
    const again = panel.node.querySelector<HTMLElement>(
      '.jp-MonarchPanel-itemHead'
    )!;
    expect(again.getAttribute('aria-expanded')).toBe('true');
    expect(document.activeElement).toBe(again);
    again.dispatchEvent(new KeyboardEvent('keydown', { key: ' ' }));
    expect(
      panel.node.querySelector('.jp-MonarchPanel-detailsTitle')
    ).toBeNull();
    panel.node.remove();
    panel.dispose();
  });
});
