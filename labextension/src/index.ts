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
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';

import {
  OPEN_DASHBOARD,
  openDashboard,
  routeDashboardLinks
} from './dashboard';
import { monarchIcon } from './icon';
// The sidebar is added as the application starts: activation needs the panel at once.
// eslint-disable-next-line jupyter/prefer-lazy-imports
import { MonarchPanel } from './panel';
import { requestAPI } from './request';
import { IShellEvent, IShellRequest, OPEN_SHELL_EVENT } from './shell';

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

const sidebar: JupyterFrontEndPlugin<void> = {
  id: 'monarch_jupyter:sidebar',
  description: 'Sidebar listing the Monarch contexts under the server root.',
  autoStart: true,
  activate: (app: JupyterFrontEnd) => {
    const settings = app.serviceManager.serverSettings;
    const terminals = app.serviceManager.terminals.isAvailable();
    const panel = new MonarchPanel(
      () => requestAPI('contexts', settings),
      item => openDashboard(app, item.key, item.name),
      terminals
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
  }
};

export default sidebar;
