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

  it('shows an error for an invalid payload', async () => {
    const node = (await render({ version: 99 })).node;
    expect(node.textContent).toMatch(/Cannot show run result/);
  });
});
