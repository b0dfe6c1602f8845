/**
 * @jest-environment jsdom
 */
import { MonarchPanel } from '../panel';
import {
  FRESH_SECONDS,
  IShellEvent,
  OPEN_SHELL_EVENT,
  SHELL_MIME,
  ShellRenderer,
  isFresh,
  parseRank,
  parseShellPayload
} from '../shell';

const payload = {
  version: 1,
  folder: '/nb',
  context: 'default',
  rank: 1,
  mesh: null,
  point: 'hosts=1',
  command: 'cd /nb && python -m monarch_jupyter.remote.rank_shell --rank 1',
  created: 1000,
  id: 'abc'
};

function listen(): IShellEvent[] {
  const seen: IShellEvent[] = [];
  window.addEventListener(OPEN_SHELL_EVENT, event =>
    seen.push((event as CustomEvent<IShellEvent>).detail)
  );
  return seen;
}

describe('shell payload', () => {
  it('parses a payload and refuses other data', () => {
    expect(parseShellPayload(payload)?.rank).toBe(1);
    expect(parseShellPayload({ ...payload, rank: -1 })).toBeNull();
    expect(parseShellPayload({ ...payload, rank: 1.5 })).toBeNull();
    expect(parseShellPayload({ ...payload, folder: '' })).toBeNull();
    expect(parseShellPayload('x')).toBeNull();
  });

  it('is fresh only once and only soon after it was made', () => {
    const p = parseShellPayload(payload)!;
    const opened = new Set<string>();
    expect(isFresh(p, 1001_000, opened)).toBe(true);
    expect(isFresh(p, (1000 + FRESH_SECONDS + 1) * 1000, opened)).toBe(false);
    opened.add('abc');
    expect(isFresh(p, 1001_000, opened)).toBe(false);
    expect(isFresh({ ...p, id: '' }, 1001_000, new Set())).toBe(false);
  });

  it('reads ranks from a text field', () => {
    expect(parseRank(' 3 ')).toBe(3);
    expect(parseRank('-1')).toBeNull();
    expect(parseRank('x')).toBeNull();
    expect(parseRank('')).toBeNull();
  });
});

describe('ShellRenderer', () => {
  it('shows the command, opens a fresh output once, and a saved one on click only', async () => {
    const seen = listen();
    const now = Date.now() / 1000;
    const renderer = new ShellRenderer({ mimeType: SHELL_MIME } as any);
    const model = {
      data: { [SHELL_MIME]: { ...payload, created: now, id: 'fresh' } }
    } as any;
    await renderer.renderModel(model);
    expect(renderer.node.textContent).toContain('A shell on rank 1 (hosts=1)');
    expect(renderer.node.querySelector('code')!.textContent).toBe(
      payload.command
    );
    expect(seen).toHaveLength(1);
    expect(seen[0].request).toEqual({
      folder: '/nb',
      context: 'default',
      rank: 1,
      mesh: null
    });
    await renderer.renderModel(model); // a re-render does not open a second terminal
    expect(seen).toHaveLength(1);

    const saved = new ShellRenderer({ mimeType: SHELL_MIME } as any);
    await saved.renderModel({ data: { [SHELL_MIME]: payload } } as any);
    expect(seen).toHaveLength(1);
    saved.node.querySelector('button')!.click();
    expect(seen).toHaveLength(2);
    seen[1].report('opened in a terminal');
    expect(saved.node.querySelector('[role=status]')!.textContent).toBe(
      'opened in a terminal'
    );
    renderer.dispose();
    saved.dispose();
  });
});

describe('the sidebar shell row', () => {
  const response = {
    root: '',
    contexts: [
      {
        name: 'exp',
        dir: 'sub/.monarch/exp',
        active: true,
        state: 'running',
        status: null
      },
      {
        name: 'idle',
        dir: '.monarch/idle',
        active: false,
        state: 'no job',
        status: null
      }
    ]
  };

  it('asks for a shell on the typed rank of the selected running context', async () => {
    const seen = listen();
    const panel = new MonarchPanel(
      () => Promise.resolve(response),
      undefined,
      true
    );
    await panel.refresh();
    expect(panel.node.querySelector('.jp-MonarchPanel-shell')).toBeNull();
    const heads = panel.node.querySelectorAll<HTMLElement>(
      '.jp-MonarchPanel-item'
    );
    const running = Array.from(heads).find(h =>
      h.textContent?.includes('exp')
    )!;
    running.click();
    const input = panel.node.querySelector<HTMLInputElement>(
      '.jp-MonarchPanel-shellRank'
    )!;
    input.value = '1';
    await panel.refresh(); // a poll keeps the row and what was typed
    expect(
      panel.node.querySelector<HTMLInputElement>('.jp-MonarchPanel-shellRank')
    ).toBe(input);
    panel.node
      .querySelector<HTMLButtonElement>('.jp-MonarchPanel-shellOpen')!
      .click();
    expect(seen.at(-1)!.request).toEqual({
      path: 'sub',
      context: 'exp',
      rank: 1
    });
    input.value = 'x';
    panel.node
      .querySelector<HTMLButtonElement>('.jp-MonarchPanel-shellOpen')!
      .click();
    expect(
      panel.node.querySelector('.jp-MonarchPanel-shellStatus')!.textContent
    ).toBe('a rank is 0, 1, …');
    panel.dispose();
  });

  it('has no shell row without terminals', async () => {
    const panel = new MonarchPanel(() => Promise.resolve(response));
    await panel.refresh();
    panel.node.querySelector<HTMLElement>('.jp-MonarchPanel-item')!.click();
    expect(panel.node.querySelector('.jp-MonarchPanel-shell')).toBeNull();
    panel.dispose();
  });
});
