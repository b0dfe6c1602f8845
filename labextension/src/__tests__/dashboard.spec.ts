/**
 * @jest-environment jsdom
 */
import { IContextEntry } from '../contextModel';
import { DashboardWidget } from '../dashboardWidget';
import { dashboardPath, dirOfApplyId, hasDashboard } from '../dashboardModel';
import { MonarchPanel } from '../panel';

function entry(
  state: string,
  urls: Record<string, string | null>,
  dir = 'nb/.monarch/default'
): IContextEntry {
  return {
    name: 'default',
    dir,
    active: true,
    state,
    status: {
      context: 'default',
      job_class: 'ProcessJob',
      apply_id: `id-${dir}`,
      spec: '',
      state,
      meshes: [],
      urls,
      updated: ''
    }
  };
}

describe('dashboardModel', () => {
  it('maps a context dir to the proxied path, each segment quoted', () => {
    expect(dashboardPath('.monarch/default')).toBe(
      'monarch-jupyter/dashboard/.monarch/default/'
    );
    expect(dashboardPath('my nb/.monarch/a#b')).toBe(
      'monarch-jupyter/dashboard/my%20nb/.monarch/a%23b/'
    );
  });

  it('has a dashboard only while running with a dashboard or telemetry URL', () => {
    expect(
      hasDashboard(entry('running', { telemetry: 'http://127.0.0.1:1' }))
    ).toBe(true);
    expect(
      hasDashboard(entry('running', { dashboard: 'http://localhost:2' }))
    ).toBe(true);
    expect(
      hasDashboard(entry('running', { telemetry: null, admin: 'x' }))
    ).toBe(false);
    expect(
      hasDashboard(entry('not running', { telemetry: 'http://127.0.0.1:1' }))
    ).toBe(false);
    expect(hasDashboard({ ...entry('running', {}), status: null })).toBe(false);
  });

  it('finds the context of an apply id', () => {
    const response = {
      root: '',
      contexts: [
        entry('running', {}, 'a/.monarch/x'),
        entry('running', {}, 'b/.monarch/y')
      ]
    };
    expect(dirOfApplyId(response, 'id-b/.monarch/y')).toBe('b/.monarch/y');
    expect(dirOfApplyId(response, 'nope')).toBeNull();
    expect(dirOfApplyId(null, 'id-a/.monarch/x')).toBeNull();
    expect(dirOfApplyId(response, '')).toBeNull();
  });
});

describe('the sidebar and the panel', () => {
  it('offers Dashboard only for a context with one, and opens that context', async () => {
    const response = {
      root: '',
      contexts: [
        entry('running', { telemetry: 'http://127.0.0.1:1' }, '.monarch/tele'),
        entry('running', { telemetry: null }, '.monarch/plain')
      ]
    };
    const opened: string[] = [];
    const panel = new MonarchPanel(
      () => Promise.resolve(response),
      item => opened.push(item.key)
    );
    await panel.refresh();
    const buttons = panel.node.querySelectorAll<HTMLButtonElement>(
      '.jp-MonarchPanel-dashboard'
    );
    expect(buttons).toHaveLength(1);
    buttons[0].click();
    expect(opened).toEqual(['.monarch/tele']);
    // the click opened the dashboard, it did not select the context
    expect(panel.node.querySelector('.jp-MonarchPanel-selected')).toBeNull();
    panel.dispose();
  });

  it('holds the proxied URL in an iframe with a closable title', () => {
    const widget = new DashboardWidget(
      '/base/monarch-jupyter/dashboard/.monarch/x/',
      'x'
    );
    expect(widget.frame.getAttribute('src')).toBe(
      '/base/monarch-jupyter/dashboard/.monarch/x/'
    );
    expect(widget.title.label).toBe('Monarch dashboard · x');
    expect(widget.title.closable).toBe(true);
    widget.dispose();
  });
});
