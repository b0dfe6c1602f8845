/**
 * The "Monarch dashboard" main-area panel: the proxied dashboard in an iframe
 * (same origin: the server's cookie authenticates its requests).
 */
import { Widget } from '@lumino/widgets';

import { el } from './dom';

const CLASS = 'jp-MonarchDashboard';

/** A main-area panel holding the dashboard in an iframe. */
export class DashboardWidget extends Widget {
  constructor(url: string, name: string) {
    super();
    this.addClass(CLASS);
    this.title.label = `Monarch dashboard · ${name}`;
    this.title.closable = true;
    this.title.caption = url;
    this.frame = el('iframe', `${CLASS}-frame`);
    this.frame.title = `Monarch dashboard of context ${name}`;
    this.frame.src = url;
    this.node.appendChild(this.frame);
  }

  readonly frame: HTMLIFrameElement;
}
