/**
 * The saved payload and the status vocabulary against their one definition,
 * monarch_jupyter/schema/remote-run.schema.json.
 */
import * as fs from 'fs';
import * as path from 'path';

import Ajv2020 from 'ajv/dist/2020';

import {
  FAILING_STATUSES,
  FINAL_STATUSES,
  FORMAT_VERSION,
  FORMAT_VERSIONS,
  MIME_TYPE,
  RANK_STATUSES,
  RUN_STATES,
  runningNote,
  filterRanks,
  parseRunResult,
  summaryText
} from '../model';

const ROOT = path.join(__dirname, '..', '..', '..');

function readJson(...parts: string[]): any {
  return JSON.parse(fs.readFileSync(path.join(ROOT, ...parts), 'utf8'));
}

const schema = readJson('monarch_jupyter', 'schema', 'remote-run.schema.json');
const validate = new Ajv2020({ allErrors: true, strict: false }).compile(
  schema
);
/** Today's version-1 payloads, frozen: old notebooks must keep rendering. */
const fixtures: Record<string, any> = readJson(
  'tests',
  'fixtures',
  'remote-run-v1.json'
);

function savedInNotebooks(): any[] {
  const found: any[] = [];
  const folder = path.join(ROOT, 'notebooks');
  for (const name of fs.readdirSync(folder).filter(n => n.endsWith('.ipynb'))) {
    const notebook = JSON.parse(
      fs.readFileSync(path.join(folder, name), 'utf8')
    );
    for (const cell of notebook.cells) {
      for (const output of cell.outputs ?? []) {
        const payload = output.data?.[MIME_TYPE];
        if (payload !== undefined) {
          found.push(payload);
        }
      }
    }
  }
  return found;
}

describe('the status vocabulary', () => {
  it('is the schema’s, in the schema’s order', () => {
    expect([...RANK_STATUSES]).toEqual(schema.$defs.status.enum);
    expect([...FINAL_STATUSES]).toEqual(schema.$defs.finalStatus.enum);
    expect([...FAILING_STATUSES]).toEqual(schema.$defs.failingStatus.enum);
    expect(MIME_TYPE).toBe(schema['x-mime-type']);
    expect([...FORMAT_VERSIONS]).toEqual(schema.properties.version.enum);
    expect(FORMAT_VERSION).toBe(Math.max(...schema.properties.version.enum));
    expect([...RUN_STATES]).toEqual(schema.properties.state.enum);
  });

  it('is the one the run widget gets: failing is decided by the kernel side', () => {
    const dir = path.join(ROOT, 'labextension', 'widgets');
    const source = fs
      .readdirSync(dir)
      .filter(name => name.endsWith('.ts'))
      .map(name => fs.readFileSync(path.join(dir, name), 'utf8'))
      .join('\n');
    // no list of failing statuses of its own...
    for (const status of FAILING_STATUSES) {
      expect(source).not.toContain(`"${status}"`);
      expect(source).not.toContain(`'${status}'`);
    }
    // ...and every status it names is one of the schema's
    const named = [...source.matchAll(/status\s*[!=]==\s*'([a-z_]+)'/g)].map(
      match => match[1]
    );
    expect(named.length).toBeGreaterThan(0);
    for (const status of named) {
      expect(schema.$defs.status.enum).toContain(status);
    }
  });
});

describe('saved payloads', () => {
  it('today’s payloads are valid and render', () => {
    const payloads = [...Object.values(fixtures), ...savedInNotebooks()];
    expect(payloads.length).toBeGreaterThanOrEqual(5);
    for (const payload of payloads) {
      expect(validate(payload)).toBe(true);
      const result = parseRunResult(payload);
      expect(result.ranks).toHaveLength(payload.ranks.length);
      expect(result.ranks.map(r => r.lines)).toEqual(
        payload.ranks.map((r: any) => r.lines)
      );
    }
    const mixed = parseRunResult(fixtures['mixed-statuses']);
    expect(summaryText(mixed.summary)).toBe('1 ok, 2 failed, 1 interrupted');
    expect(filterRanks(mixed.ranks, true).map(r => r.label)).toEqual([
      'hosts=1',
      'hosts=2',
      'hosts=3'
    ]);
    expect(mixed.ranks[2].error).toBe('worker process 4242 died');
  });

  it('the schema rejects what the renderer rejects', () => {
    const bad = JSON.parse(JSON.stringify(fixtures['mixed-statuses']));
    bad.ranks[0].status = 'exploded';
    expect(validate(bad)).toBe(false);
    expect(() => parseRunResult(bad)).toThrow(/status/);
    const badLine = JSON.parse(JSON.stringify(fixtures['mixed-statuses']));
    badLine.ranks[0].lines = [['stdout', 'x']];
    expect(validate(badLine)).toBe(false);
    expect(() => parseRunResult(badLine)).toThrow(/lines\[0\]/);
    const other = { ...fixtures['mixed-statuses'], version: 3 };
    expect(validate(other)).toBe(false);
    expect(() => parseRunResult(other)).toThrow(/version/);
  });

  it('a version-2 running payload is valid, and says to attach', () => {
    const running = {
      ...fixtures['mixed-statuses'],
      version: 2,
      run_id: '20261201-010203-abc123',
      state: 'running'
    };
    expect(validate(running)).toBe(true);
    expect(runningNote(parseRunResult(running))).toContain(
      '%remote attach 20261201-010203-abc123'
    );
    expect(validate({ ...running, state: 'sleeping' })).toBe(false);
    expect(validate({ ...running, run_id: 7 })).toBe(false);
  });

  it('every status the schema allows is one the renderer accepts', () => {
    for (const status of schema.$defs.status.enum) {
      const payload = JSON.parse(JSON.stringify(fixtures['mixed-statuses']));
      payload.ranks[0].status = status;
      expect(validate(payload)).toBe(true);
      expect(parseRunResult(payload).ranks[0].status).toBe(status);
    }
  });
});
