/** The one shape of this extension's MIME renderers (renderer.ts, shell.ts). */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

/**
 * A renderer of one mimetype's payload: its node carries `className`, and each
 * render starts from an empty node with the model's data of that mimetype.
 */
export abstract class PayloadRenderer
  extends Widget
  implements IRenderMime.IRenderer
{
  constructor(options: IRenderMime.IRendererOptions, className: string) {
    super();
    this._mimeType = options.mimeType;
    this.addClass(className);
  }

  abstract renderModel(model: IRenderMime.IMimeModel): Promise<void>;

  /** Empties the node and returns the model's data of this renderer's mimetype. */
  protected freshPayload(model: IRenderMime.IMimeModel): unknown {
    this.node.textContent = '';
    return model.data[this._mimeType];
  }

  private readonly _mimeType: string;
}
