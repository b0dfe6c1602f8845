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
});
