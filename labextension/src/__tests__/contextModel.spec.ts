import {
  folderOf,
  formatIso,
  formatStarted,
  pollMs,
  stateClass,
  toItems
} from '../contextModel';

const status = {
  context: 'default',
  job_class: 'ProcessJob',
  apply_id: 'uuid-1',
  spec: 'monarch_jupyter.local_jobs.hosts_2',
  state: 'running',
  meshes: [{ name: 'hosts', hosts: 2, live_workers: 2 }],
  urls: { telemetry: null, dashboard: 'http://localhost:1234', admin: null },
  updated: '2026-11-30T15:00:00Z'
};

const response = {
  root: '',
  contexts: [
    {
      name: 'other',
      dir: 'proj/.monarch/other',
      active: false,
      state: 'unknown',
      status: null
    },
    {
      name: 'default',
      dir: '.monarch/default',
      active: true,
      state: 'running',
      status,
      runs: [
        {
          id: '20261201-010203-abc123',
          command: 'python train.py',
          target: 'mesh hosts (2 ranks)',
          started: 1764550923,
          state: 'running',
          attach: '%remote attach 20261201-010203-abc123'
        },
        { command: 'no id: dropped' },
        'junk'
      ]
    },
    {
      name: 'old',
      dir: '.monarch/old',
      active: false,
      state: 'not running',
      status: { ...status, state: 'not running', meshes: [] }
    }
  ]
};

describe('toItems', () => {
  it('lists root contexts first and marks the active one', () => {
    const items = toItems(response);
    expect(items.map(i => i.key)).toEqual([
      '.monarch/default',
      '.monarch/old',
      'proj/.monarch/other'
    ]);
    expect(items.filter(i => i.active).map(i => i.name)).toEqual(['default']);
  });

  it('describes meshes and details', () => {
    const [active] = toItems(response);
    expect(active.state).toBe('running');
    expect(active.meshes).toEqual(['hosts ×2 (2 live)']);
    expect(active.details).toEqual([
      ['directory', '.monarch/default'],
      ['job class', 'ProcessJob'],
      ['apply id', 'uuid-1'],
      ['spec', 'monarch_jupyter.local_jobs.hosts_2'],
      ['updated', formatStarted(Date.UTC(2026, 10, 30, 15) / 1000)],
      ['dashboard url', 'http://localhost:1234']
    ]);
  });

  it('shows the server UTC times in local time', () => {
    const local = formatIso('2026-11-30T15:00:00Z');
    expect(local).toMatch(/^2026-11-3\d \d\d:00:00$|^2026-12-01 \d\d:00:00$/);
    expect(local).toBe(formatStarted(Date.UTC(2026, 10, 30, 15, 0, 0) / 1000));
    expect(formatIso('')).toBe('');
    expect(formatIso('soon')).toBe('soon');
  });

  it('shows a context without status.json as unknown', () => {
    const other = toItems(response)[2];
    expect(other).toMatchObject({
      folder: 'proj',
      state: 'unknown',
      meshes: [],
      details: [['directory', 'proj/.monarch/other']]
    });
  });

  it('drops malformed input', () => {
    expect(toItems(null)).toEqual([]);
    expect(toItems({ contexts: 'x' })).toEqual([]);
    expect(toItems({ contexts: [{ name: 1 }, null] })).toEqual([]);
    const [weird] = toItems({
      contexts: [{ name: 'w', dir: '.monarch/w', state: 'on fire' }]
    });
    expect(weird.state).toBe('unknown');
    expect(weird.active).toBe(false);
  });
});

describe('helpers', () => {
  it('finds the folder of a context dir', () => {
    expect(folderOf('.monarch/default')).toBe('');
    expect(folderOf('a/b/.monarch/x')).toBe('a/b');
  });

  it('makes state CSS tokens', () => {
    expect(stateClass('workers dead')).toBe('workers-dead');
    expect(stateClass('no job')).toBe('no-job');
    expect(stateClass('bogus')).toBe('unknown');
  });
});

describe('running runs', () => {
  it('lists a context’s running runs with the attach line, drops malformed ones', () => {
    const items = toItems(response);
    const runs = items.find(i => i.name === 'default')!.runs;
    expect(runs).toEqual([
      {
        id: '20261201-010203-abc123',
        command: 'python train.py',
        target: 'mesh hosts (2 ranks)',
        started: formatStarted(1764550923),
        state: 'running',
        attach: '%remote attach 20261201-010203-abc123'
      }
    ]);
    expect(runs[0].started).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
    // contexts without runs (or an older server without the field) list none
    expect(items.find(i => i.name === 'old')!.runs).toEqual([]);
    expect(formatStarted(null)).toBe('');
  });
});

describe('pollMs', () => {
  it("takes the server's poll_seconds, else the fallback", () => {
    expect(pollMs({ root: '', contexts: [], poll_seconds: 7.5 }, 3000)).toBe(
      7500
    );
    expect(pollMs({ root: '', contexts: [] }, 3000)).toBe(3000); // an older server
    expect(pollMs({ poll_seconds: 0 }, 3000)).toBe(3000);
    expect(pollMs({ poll_seconds: 'x' }, 3000)).toBe(3000);
    expect(pollMs(null, 3000)).toBe(3000);
  });
});
