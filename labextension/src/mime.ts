/**
 * Mime extension entry point: registers the run-result renderer.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';

import { rendererFactory } from './renderer';

const extension: IRenderMime.IExtension = {
  id: 'monarch_jupyter:run-result',
  description: 'Renders Monarch %%remote run results.',
  rendererFactory,
  rank: 10,
  dataType: 'json'
};

export default extension;
