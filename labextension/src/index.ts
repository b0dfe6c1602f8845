/**
 * Frontend entry point: registers the Monarch sidebar plugin.
 * (The run-result renderer is the mime extension in mime.ts.)
 */
import {
  ILabShell,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';

import { monarchIcon } from './icon';
// The sidebar is added as the application starts: activation needs the panel at once.
// eslint-disable-next-line jupyter/prefer-lazy-imports
import { MonarchPanel } from './panel';
import { requestAPI } from './request';

const sidebar: JupyterFrontEndPlugin<void> = {
  id: 'monarch_jupyter:sidebar',
  description: 'Sidebar listing the Monarch contexts under the server root.',
  autoStart: true,
  requires: [ILabShell],
  activate: (app: JupyterFrontEnd, shell: ILabShell) => {
    const settings = app.serviceManager.serverSettings;
    const panel = new MonarchPanel(() => requestAPI('contexts', settings));
    panel.id = 'monarch-jupyter-sidebar';
    panel.title.icon = monarchIcon;
    panel.title.caption = 'Monarch';
    shell.add(panel, 'left', { rank: 900 });
  }
};

export default sidebar;
