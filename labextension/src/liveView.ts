/**
 * One output, one view: the live widget where its model is there, the output's own static copy
 * where it is not (a notebook reopened without its kernel, a model closed).
 *
 * The `%job` widget and a running `%%remote` grid are each one static output: text, HTML and our
 * payload, which names the widget's model (`model_id`). The output holds no widget view, so
 * front ends without this extension show the HTML (a saved view would outrank it and draw
 * "Error displaying widget: model not found"). In each notebook this factory draws the copy at
 * once and, where the payload names a model, swaps that model's live view in only once it has
 * really rendered, so nothing shows twice and no error shows in place of the output. (Outputs
 * saved by older versions still carry the widget view: it is used the same way.)
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry, MimeModel } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Panel } from '@lumino/widgets';

// Both are needed synchronously when an output renders, and the renderer is already in the bundle.
// eslint-disable-next-line jupyter/prefer-lazy-imports
import { MIME_TYPE } from './model';
// eslint-disable-next-line jupyter/prefer-lazy-imports
import { RunResultRenderer } from './renderer';

import { JOB_MIME, WIDGET_MIME, liveModelId } from './liveModel';

export { JOB_MIME, WIDGET_MIME, liveModelId };
/** Ahead of the widget renderer (-10) in a notebook's registry. */
export const LIVE_RANK = -20;

/** Whether the output's live view has rendered: its node holds an element (the view). */
export function viewRendered(node: HTMLElement): boolean {
  return node.firstElementChild !== null;
}

/** The static copy of an output: the run result renderer for a run, the HTML for `%job`. */
function staticRenderer(
  mimeType: string,
  rendermime: IRenderMimeRegistry,
  options: IRenderMime.IRendererOptions
): IRenderMime.IRenderer {
  if (mimeType === MIME_TYPE) {
    return new RunResultRenderer({ ...options, mimeType });
  }
  return rendermime.createRenderer('text/html');
}

export class LiveOrStatic extends Panel implements IRenderMime.IRenderer {
  constructor(
    private readonly _rendermime: IRenderMimeRegistry,
    private readonly _options: IRenderMime.IRendererOptions
  ) {
    super();
    this.addClass('jp-MonarchLiveOrStatic');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const modelId = liveModelId(model.data, this._options.mimeType);
    if (this._copy && modelId && modelId === this._modelId) {
      // the kernel re-published the copy (a later %job kill, say): the live view stays
      await this._copy.renderModel(model);
      return;
    }
    this._watch?.disconnect();
    for (const child of [...this.widgets]) {
      child.dispose();
    }
    const copyMime =
      this._options.mimeType === MIME_TYPE ? MIME_TYPE : 'text/html';
    const copy = staticRenderer(copyMime, this._rendermime, this._options);
    this._copy = copy;
    this._modelId = modelId;
    this.addWidget(copy);
    const live = this._live(model, modelId);
    await copy.renderModel(model);
    if (live) {
      await live.renderModel(
        new MimeModel({
          trusted: true,
          data: {
            [WIDGET_MIME]: {
              version_major: 2,
              version_minor: 1,
              model_id: modelId
            }
          }
        })
      );
    }
  }

  /** The widget's renderer, hidden until its view renders (null: no live view to try). */
  private _live(
    model: IRenderMime.IMimeModel,
    modelId: string | null
  ): IRenderMime.IRenderer | null {
    if (
      !modelId ||
      !model.trusted ||
      !this._rendermime.getFactory(WIDGET_MIME)
    ) {
      return null;
    }
    const live = this._rendermime.createRenderer(WIDGET_MIME);
    live.hide();
    this.addWidget(live);
    const copy = this.widgets[0];
    let up = false;
    const swap = (): void => {
      if (!up && viewRendered(live.node)) {
        up = true; // the view is there: it replaces the copy
        live.show();
        copy.hide();
      } else if (up && live.node.classList.contains('lm-mod-hidden')) {
        copy.show(); // its model was closed and the widget renderer hid the view
      }
    };
    this._watch = new MutationObserver(swap);
    this._watch.observe(live.node, {
      childList: true,
      attributes: true,
      attributeFilter: ['class']
    });
    return live;
  }

  dispose(): void {
    this._watch?.disconnect();
    super.dispose();
  }

  private _watch: MutationObserver | null = null;
  private _copy: IRenderMime.IRenderer | null = null;
  private _modelId: string | null = null;
}

/** The factory for one notebook's registry (the one that holds its widget renderer). */
export function liveFactory(
  rendermime: IRenderMimeRegistry
): IRenderMime.IRendererFactory {
  return {
    safe: true, // it draws a live view only for trusted outputs
    mimeTypes: [MIME_TYPE, JOB_MIME],
    createRenderer: options => new LiveOrStatic(rendermime, options)
  };
}

/** Rank this notebook's registry so our outputs go through `LiveOrStatic`. */
export function addLiveFactory(rendermime: IRenderMimeRegistry): void {
  rendermime.addFactory(liveFactory(rendermime), LIVE_RANK);
}

/** Ranks `LiveOrStatic` in every notebook's registry, the open ones and those to come. */
export const liveViews: JupyterFrontEndPlugin<void> = {
  id: 'monarch_jupyter:live-views',
  description:
    'Draws the %job widget and a running grid live, or their static copy when the model is gone.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker) => {
    tracker.forEach(panel => addLiveFactory(panel.content.rendermime));
    tracker.widgetAdded.connect((_tracker, panel) =>
      addLiveFactory(panel.content.rendermime)
    );
  }
};
