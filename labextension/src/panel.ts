/**
 * The "Monarch" sidebar: lists the contexts under the server root, polls
 * while visible, and shows the details of the clicked context.
 */
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import {
  IContextItem,
  IRunItem,
  pollMs,
  stateClass,
  toItems,
  truncatedNote
} from './contextModel';
import { el } from './dom';
import { shellControls } from './shell';

const CLASS = 'jp-MonarchPanel';

/** How often the panel refreshes while visible, unless the server's settings say otherwise. */
export const POLL_MS = 3000;

/** Where the panel gets the contexts JSON from. */
export type ContextsFetcher = () => Promise<unknown>;

/** Opens a context's Monarch dashboard (dashboard.ts). */
export type DashboardOpener = (item: IContextItem) => void;

/** Sidebar widget listing Monarch contexts. */
export class MonarchPanel extends Widget {
  /** `shells`: offer a "Shell on rank" row for the selected running context (needs terminals);
   * `refreshGlyph`: the refresh button's icon (JupyterLab's, given by the plugin). */
  constructor(
    fetchContexts: ContextsFetcher,
    openDashboard?: DashboardOpener,
    shells = false,
    refreshGlyph?: HTMLElement
  ) {
    super();
    this._fetch = fetchContexts;
    this._openDashboard = openDashboard;
    this._shells = shells;
    this.addClass(CLASS);
    const title = el('div', `${CLASS}-title`);
    const refresh = el('button', `${CLASS}-refresh jp-Button jp-mod-minimal`);
    refresh.type = 'button';
    refresh.title = 'Refresh: list the contexts again now';
    refresh.setAttribute('aria-label', 'Refresh the Monarch contexts');
    refresh.append(refreshGlyph ?? el('span', '', '⟳'));
    refresh.addEventListener('click', () => void this.refresh());
    title.append(el('span', `${CLASS}-titleText`, 'Monarch'), refresh);
    this.node.appendChild(title);
    this._list = el('ul', `${CLASS}-list`);
    this._list.setAttribute('aria-label', 'Monarch contexts');
    this._message = el('div', `${CLASS}-message`, 'Loading…');
    this._message.setAttribute('role', 'status');
    this._details = el('div', `${CLASS}-details`);
    this._shell = el('div', `${CLASS}-shellBox`);
    this.node.append(this._message, this._list, this._details, this._shell);
  }

  /** Fetch once and redraw; errors are shown in the panel. */
  async refresh(): Promise<void> {
    try {
      const response = await this._fetch();
      this._pollMs = pollMs(response, POLL_MS);
      this._items = toItems(response);
      this._message.textContent = this._items.length
        ? truncatedNote(response)
        : 'No contexts yet: start one with %job in a notebook.';
    } catch (error) {
      this._message.textContent = `Cannot list contexts: ${error}`;
    }
    this._render();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._startPolling();
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    if (this.isVisible) {
      this._startPolling();
    }
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this._stopPolling();
  }

  protected onBeforeDetach(msg: Message): void {
    this._stopPolling();
    super.onBeforeDetach(msg);
  }

  dispose(): void {
    this._stopPolling();
    super.dispose();
  }

  private _startPolling(): void {
    if (this._polling) {
      return;
    }
    this._polling = true;
    const generation = ++this._generation;
    const tick = async (): Promise<void> => {
      await this.refresh();
      if (this._polling && generation === this._generation) {
        this._timer = window.setTimeout(tick, this._pollMs);
      }
    };
    void tick();
  }

  private _stopPolling(): void {
    this._polling = false;
    window.clearTimeout(this._timer);
  }

  private _render(): void {
    const focused = this._list.contains(document.activeElement)
      ? (document.activeElement as HTMLElement).dataset.key
      : undefined;
    this._list.textContent = '';
    for (const item of this._items) {
      this._list.appendChild(this._renderItem(item));
    }
    const selected = this._items.find(item => item.key === this._selected);
    this._renderDetails(selected);
    this._renderShell(selected);
    if (focused) {
      this._focus(focused);
    }
  }

  private _renderItem(item: IContextItem): HTMLElement {
    const row = el('li', `${CLASS}-item`);
    row.classList.toggle(`${CLASS}-active`, item.active);
    row.classList.toggle(`${CLASS}-selected`, item.key === this._selected);
    row.title = item.key;
    const head = el('div', `${CLASS}-itemHead`);
    head.appendChild(el('span', `${CLASS}-name`, item.name));
    if (item.folder) {
      head.appendChild(el('span', `${CLASS}-folder`, item.folder));
    }
    if (item.active) {
      head.appendChild(el('span', `${CLASS}-activeTag`, 'active'));
    }
    head.appendChild(
      el(
        'span',
        `${CLASS}-state ${CLASS}-state-${stateClass(item.state)}`,
        item.state
      )
    );
    row.appendChild(head);
    if (item.dashboard && this._openDashboard) {
      row.appendChild(this._dashboardButton(item, this._openDashboard));
    }
    if (item.meshes.length) {
      row.appendChild(el('div', `${CLASS}-meshes`, item.meshes.join(', ')));
    }
    if (item.runs.length) {
      const runs = el('ul', `${CLASS}-runs`);
      for (const run of item.runs) {
        runs.appendChild(this._renderRun(run));
      }
      row.appendChild(runs);
    }
    // a button for the keyboard and screen readers: Enter or Space shows its details
    const selected = item.key === this._selected;
    head.tabIndex = 0;
    head.setAttribute('role', 'button');
    head.setAttribute('aria-expanded', String(selected));
    head.setAttribute(
      'aria-label',
      `context ${item.name}${item.folder ? ` in ${item.folder}` : ''}: ${item.state}${item.active ? ', active' : ''}`
    );
    const toggle = (): void => {
      this._selected = selected ? null : item.key;
      this._render();
      this._focus(item.key);
    };
    row.addEventListener('click', toggle);
    head.addEventListener('keydown', event => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        toggle();
      }
    });
    head.dataset.key = item.key;
    return row;
  }

  /** One running run: command, target, start, and the attach line to copy. */
  private _renderRun(run: IRunItem): HTMLElement {
    const row = el('li', `${CLASS}-run`);
    row.dataset.run = run.id;
    row.title = run.id;
    const head = el('div', `${CLASS}-runHead`);
    head.appendChild(el('code', `${CLASS}-runCommand`, run.command || run.id));
    head.appendChild(
      el('span', `${CLASS}-state ${CLASS}-state-running`, run.state)
    );
    row.appendChild(head);
    const meta = [run.target, run.started && `started ${run.started}`];
    row.appendChild(
      el('div', `${CLASS}-runMeta`, meta.filter(Boolean).join(' · '))
    );
    const attach = el('div', `${CLASS}-runAttach`);
    const line = el('code', `${CLASS}-attach`, run.attach);
    const copy = el('button', `${CLASS}-copy jp-mod-styled`, 'Copy');
    copy.title = 'Copy the line; run it in a notebook of this folder';
    copy.addEventListener('click', event => {
      event.stopPropagation(); // not a click on the context
      void navigator.clipboard?.writeText(run.attach).then(
        () => (copy.textContent = 'Copied'),
        () => (copy.textContent = 'Select the line to copy')
      );
    });
    line.addEventListener('click', event => event.stopPropagation());
    attach.append(line, copy);
    row.appendChild(attach);
    return row;
  }

  /** "Dashboard": opens the context's Monarch dashboard (a click on it is not one on the context). */
  private _dashboardButton(
    item: IContextItem,
    open: DashboardOpener
  ): HTMLElement {
    const button = el(
      'button',
      `${CLASS}-dashboard jp-mod-styled`,
      'Dashboard'
    );
    button.title = `Open the Monarch dashboard of context ${item.name}`;
    button.addEventListener('click', event => {
      event.stopPropagation();
      open(item);
    });
    return button;
  }

  /** Give the focus back to a context's row after a redraw. */
  private _focus(key: string): void {
    for (const head of Array.from(
      this._list.querySelectorAll<HTMLElement>(`.${CLASS}-itemHead`)
    )) {
      if (head.dataset.key === key) {
        head.focus();
      }
    }
  }

  private _renderDetails(item: IContextItem | undefined): void {
    this._details.textContent = '';
    if (!item) {
      return;
    }
    this._details.appendChild(el('div', `${CLASS}-detailsTitle`, item.name));
    const table = el('table', `${CLASS}-detailsTable`);
    const rows: [string, string][] = [
      ['state', item.state],
      ...item.meshes.map((mesh): [string, string] => ['mesh', mesh]),
      ...item.details
    ];
    for (const [key, value] of rows) {
      const tr = el('tr', '');
      tr.append(el('th', '', key), el('td', '', value));
      table.appendChild(tr);
    }
    this._details.appendChild(table);
  }

  /** The shell row, rebuilt only when the selected running context changes (polls keep what is typed). */
  private _renderShell(item: IContextItem | undefined): void {
    const key = this._shells && item?.state === 'running' ? item.key : null;
    if (key === this._shellKey) {
      return;
    }
    this._shellKey = key;
    this._shell.textContent = '';
    if (item && key) {
      this._shell.appendChild(shellControls(item.folder, item.name, CLASS));
    }
  }

  private _fetch: ContextsFetcher;
  private _openDashboard: DashboardOpener | undefined;
  private _shells: boolean;
  private _shell: HTMLDivElement;
  private _shellKey: string | null = null;
  private _list: HTMLUListElement;
  private _message: HTMLDivElement;
  private _details: HTMLDivElement;
  private _items: IContextItem[] = [];
  private _selected: string | null = null;
  private _polling = false;
  private _timer = 0;
  private _pollMs = POLL_MS;
  /** Bumped on every start so a stale in-flight tick cannot re-arm the timer. */
  private _generation = 0;
}
