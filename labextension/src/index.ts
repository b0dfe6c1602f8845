/**
 * Frontend entry point: registers the Monarch sidebar plugin.
 * (The run-result renderer is the mime extension in mime.ts.)
 *
 * The plugin asks for no shell token, only the generic `app.shell`, so it
 * activates in JupyterLab (LabShell) and in Jupyter Notebook 7 (NotebookShell)
 * alike: both take a widget in the 'left' area. In Notebook 7 the side panels
 * exist on the notebook page (View → Show Left Sidebar → Monarch, the entry is
 * named after `title.caption`); on its file-browser page the panel stays hidden,
 * and a hidden panel does not poll.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { refreshIcon } from '@jupyterlab/ui-components';

import {
  OPEN_DASHBOARD,
  openDashboard,
  routeDashboardLinks
} from './dashboard';
import { monarchIcon } from './icon';
import { liveViews } from './liveView';
// The sidebar is added as the application starts: activation needs the panel at once.
// eslint-disable-next-line jupyter/prefer-lazy-imports
import { MonarchPanel } from './panel';
import { requestAPI } from './request';
import { IShellEvent, IShellRequest, OPEN_SHELL_EVENT } from './shellEvent';

/**
 * Open a terminal running a shell on a rank: the server starts it (its route
 * checks the rank), `terminal:open` shows it, and closing its tab shuts the
 * terminal down, which ends the shell on the rank.
 */
async function openShell(
  app: JupyterFrontEnd,
  request: IShellRequest
): Promise<void> {
  if (!app.commands.hasCommand('terminal:open')) {
    throw new Error('this front end has no terminals: run the command shown');
  }
  const settings = app.serviceManager.serverSettings;
  const { name } = await requestAPI<{ name: string }>('shell', settings, {
    method: 'POST',
    body: JSON.stringify(request)
  });
  const widget = (await app.commands.execute('terminal:open', { name })) as
    { disposed?: { connect: (fn: () => void) => void } } | undefined;
  widget?.disposed?.connect(() => {
    void app.serviceManager.terminals.shutdown(name).catch(() => undefined);
  });
}

function listenForShells(app: JupyterFrontEnd): void {
  window.addEventListener(OPEN_SHELL_EVENT, event => {
    const { request, report } = (event as CustomEvent<IShellEvent>).detail;
    openShell(app, request).then(
      () => report('opened in a terminal'),
      error => report(`${error?.message ?? error}`)
    );
  });
}

/** The palette's commands for the sidebar. */
export const SHOW_SIDEBAR = 'monarch:show-sidebar';
export const REFRESH_SIDEBAR = 'monarch:refresh-sidebar';
const PALETTE_CATEGORY = 'Monarch';

function addSidebarCommands(
  app: JupyterFrontEnd,
  panel: MonarchPanel,
  palette: ICommandPalette | null
): void {
  app.commands.addCommand(SHOW_SIDEBAR, {
    label: 'Show Monarch Sidebar',
    caption: 'Show the Monarch contexts and their jobs',
    describedBy: { args: { type: 'object', properties: {} } },
    execute: () => app.shell.activateById(panel.id)
  });
  app.commands.addCommand(REFRESH_SIDEBAR, {
    label: 'Refresh Monarch Sidebar',
    caption: 'List the Monarch contexts again now',
    describedBy: { args: { type: 'object', properties: {} } },
    execute: () => panel.refresh()
  });
  for (const command of [SHOW_SIDEBAR, REFRESH_SIDEBAR]) {
    palette?.addItem({ command, category: PALETTE_CATEGORY });
  }
}

const sidebar: JupyterFrontEndPlugin<void> = {
  id: 'monarch_jupyter:sidebar',
  description: 'Sidebar listing the Monarch contexts under the server root.',
  autoStart: true,
  // both optional: Notebook 7's pages have no layout restorer, a kiosk may have no palette
  optional: [ILayoutRestorer, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null
  ) => {
    const settings = app.serviceManager.serverSettings;
    const terminals = app.serviceManager.terminals.isAvailable();
    const panel = new MonarchPanel(
      () => requestAPI('contexts', settings),
      item => openDashboard(app, item.key, item.name),
      terminals,
      refreshIcon.element({ tag: 'span' })
    );
    if (terminals) {
      listenForShells(app);
    }
    app.commands.addCommand(OPEN_DASHBOARD, {
      label: 'Open Monarch Dashboard',
      caption: "Open a context's Monarch dashboard",
      describedBy: {
        args: {
          type: 'object',
          properties: {
            dir: {
              type: 'string',
              description: 'The context dir, relative to the server root'
            },
            name: { type: 'string', description: 'The context name' }
          },
          required: ['dir']
        }
      },
      execute: args =>
        openDashboard(app, String(args.dir ?? ''), String(args.name ?? ''))
    });
    routeDashboardLinks(app, path =>
      requestAPI(`contexts?path=${encodeURIComponent(path)}`, settings)
    );
    panel.id = 'monarch-jupyter-sidebar';
    panel.title.icon = monarchIcon;
    panel.title.caption = 'Monarch';
    app.shell.add(panel, 'left', { rank: 900 });
    // the sidebar comes back open (or closed) with the rest of the layout on reload
    restorer?.add(panel, panel.id);
    addSidebarCommands(app, panel, palette);
  }
};

export default [sidebar, liveViews];
