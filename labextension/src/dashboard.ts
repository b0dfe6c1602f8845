/**
 * The "Monarch dashboard" panel: a context's Monarch dashboard, served by our
 * server extension at `monarch-jupyter/dashboard/<context dir>/` (behind the
 * Jupyter server's own authentication), in a main-area panel in JupyterLab and
 * in a new tab in Notebook 7 (whose main area holds one document).
 *
 * Opened from the sidebar's "Dashboard" button and from the `%job` widget's
 * link (`a[data-monarch-dashboard]`, carrying the job's apply id).
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { URLExt } from '@jupyterlab/coreutils';

import { dashboardPath, dirOfApplyId } from './dashboardModel';
import { DashboardWidget } from './dashboardWidget';
import { monarchIcon } from './icon';

export const OPEN_DASHBOARD = 'monarch-jupyter:open-dashboard';

/** Open the dashboard of context dir `dir`: a Lab panel (one per context), else a new tab. */
export function openDashboard(
  app: JupyterFrontEnd,
  dir: string,
  name: string
): void {
  const url = URLExt.join(
    app.serviceManager.serverSettings.baseUrl,
    dashboardPath(dir)
  );
  if (app.name === 'Jupyter Notebook') {
    window.open(url, '_blank', 'noopener');
    return;
  }
  const id = `monarch-dashboard:${dir}`;
  for (const widget of app.shell.widgets('main')) {
    if (widget.id === id) {
      app.shell.activateById(id);
      return;
    }
  }
  const widget = new DashboardWidget(url, name);
  widget.id = id;
  widget.title.icon = monarchIcon;
  app.shell.add(widget, 'main');
  app.shell.activateById(id);
}

/** The folder of the document (notebook) showing `node`, relative to the root; '' if unknown. */
function folderOfDocument(app: JupyterFrontEnd, node: Element): string {
  for (const widget of app.shell.widgets('main')) {
    const path = (widget as { context?: { path?: unknown } }).context?.path;
    if (widget.node.contains(node) && typeof path === 'string') {
      return path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '';
    }
  }
  return '';
}

/**
 * Route clicks on the `%job` widget's dashboard link to the proxied panel: the
 * link's apply id is looked up in the contexts under the notebook's folder, then
 * under the root; when none matches, the link's own href is followed.
 */
export function routeDashboardLinks(
  app: JupyterFrontEnd,
  fetchContexts: (path: string) => Promise<unknown>
): void {
  document.addEventListener('click', event => {
    const link = (event.target as Element | null)?.closest?.(
      'a[data-monarch-dashboard]'
    ) as HTMLAnchorElement | null;
    if (!link) {
      return;
    }
    event.preventDefault();
    const applyId = link.dataset.monarchDashboard ?? '';
    const name = link.dataset.monarchContext ?? 'default';
    const folder = folderOfDocument(app, link);
    void (async () => {
      for (const path of folder ? [folder, ''] : ['']) {
        try {
          const dir = dirOfApplyId(await fetchContexts(path), applyId);
          if (dir) {
            openDashboard(app, dir, name);
            return;
          }
        } catch {
          // the listing failed: try the next folder, then the link itself
        }
      }
      window.open(link.href, '_blank', 'noopener');
    })();
  });
}
