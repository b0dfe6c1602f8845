/**
 * Mime extension entry point: registers the run-result renderer and the
 * `%remote shell` renderer (shell.ts).
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';

import { rendererFactory } from './renderer';
import { shellRendererFactory } from './shell';

const extension: IRenderMime.IExtension = {
  id: 'monarch_jupyter:run-result',
  description: 'Renders Monarch %%remote run results.',
  rendererFactory,
  rank: 10,
  dataType: 'json'
};

const shellExtension: IRenderMime.IExtension = {
  id: 'monarch_jupyter:shell',
  description: 'Opens the terminal of a %remote shell output.',
  rendererFactory: shellRendererFactory,
  rank: 10,
  dataType: 'json'
};

export default [extension, shellExtension];
