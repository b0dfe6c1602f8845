/**
 * A shell on one rank, in a JupyterLab terminal.
 *
 * `%remote shell --rank N` displays an `application/vnd.monarch.shell+json`
 * payload: its renderer shows the command and an "Open terminal" button, and
 * opens the terminal by itself once, when the output is fresh (not a saved
 * notebook's). The sidebar has the same button per running context. Both ask
 * for the terminal with a window event the plugin (index.ts, which has the
 * app) answers: POST /monarch-jupyter/shell, then `terminal:open`.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { el } from './dom';

export const SHELL_MIME = 'application/vnd.monarch.shell+json';

/** The window event asking the plugin for a terminal: its detail is an `IShellEvent`. */
export const OPEN_SHELL_EVENT = 'monarch-jupyter:open-shell';

/** How long after `%remote shell` ran its output still opens a terminal by itself. */
export const FRESH_SECONDS = 120;

/** What the server's shell route takes: a folder (relative `path` or absolute `folder`) and a rank. */
export interface IShellRequest {
  path?: string;
  folder?: string;
  context: string | null;
  rank: number;
  mesh?: string | null;
}

/** The payload `%remote shell` displays (rank_shell.bundle). */
export interface IShellPayload {
  folder: string;
  context: string | null;
  rank: number;
  mesh: string | null;
  point: string;
  command: string;
  /** Epoch seconds. */
  created: number;
  id: string;
}

export interface IShellEvent {
  request: IShellRequest;
  /** Called with a line saying what happened ('' when the terminal opened). */
  report: (message: string) => void;
}

function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** The payload, or null when it is not one. */
export function parseShellPayload(data: unknown): IShellPayload | null {
  if (typeof data !== 'object' || data === null) {
    return null;
  }
  const d = data as Record<string, unknown>;
  if (
    typeof d.rank !== 'number' ||
    !Number.isInteger(d.rank) ||
    d.rank < 0 ||
    !str(d.folder)
  ) {
    return null;
  }
  return {
    folder: str(d.folder),
    context: str(d.context) || null,
    rank: d.rank,
    mesh: str(d.mesh) || null,
    point: str(d.point),
    command: str(d.command),
    created: typeof d.created === 'number' ? d.created : 0,
    id: str(d.id)
  };
}

/** Whether this output should open its terminal by itself now (fresh, and not opened yet). */
export function isFresh(
  payload: IShellPayload,
  nowMs: number,
  opened: Set<string>
): boolean {
  const age = nowMs / 1000 - payload.created;
  return (
    !!payload.id && !opened.has(payload.id) && age >= -30 && age < FRESH_SECONDS
  );
}

/** The rank a text field holds, or null when it is not a flat rank. */
export function parseRank(text: string): number | null {
  const t = text.trim();
  return /^\d{1,6}$/.test(t) ? Number(t) : null;
}

/** Ask the plugin for a terminal (see `OPEN_SHELL_EVENT`). */
export function requestShell(
  request: IShellRequest,
  report: (message: string) => void
): void {
  window.dispatchEvent(
    new CustomEvent<IShellEvent>(OPEN_SHELL_EVENT, {
      detail: { request, report }
    })
  );
}

/** Outputs that opened their terminal already, in this page (re-renders must not open another). */
const OPENED = new Set<string>();

const CLASS = 'jp-MonarchShell';

/** Renders `%remote shell`'s payload: the command, a button, and the outcome line. */
export class ShellRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this._mimeType = options.mimeType;
    this.addClass(CLASS);
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.node.textContent = '';
    const payload = parseShellPayload(model.data[this._mimeType]);
    if (!payload) {
      this.node.appendChild(el('div', `${CLASS}-error`, 'Not a shell payload'));
      return Promise.resolve();
    }
    const where = `rank ${payload.rank}${payload.point ? ` (${payload.point})` : ''}${payload.mesh ? ` of mesh ${payload.mesh}` : ''}`;
    const head = el('div', `${CLASS}-head`, `A shell on ${where}`);
    const button = el('button', `${CLASS}-open jp-mod-styled`, 'Open terminal');
    const status = el('span', `${CLASS}-status`);
    status.setAttribute('role', 'status');
    head.append(' ', button, ' ', status);
    const line = el('code', `${CLASS}-command`, payload.command);
    line.title = 'Or run this line in any terminal';
    this.node.append(head, line);
    const open = (): void => {
      status.textContent = 'opening…';
      requestShell(
        {
          folder: payload.folder,
          context: payload.context,
          rank: payload.rank,
          mesh: payload.mesh
        },
        message => (status.textContent = message)
      );
    };
    button.addEventListener('click', open);
    if (isFresh(payload, Date.now(), OPENED)) {
      OPENED.add(payload.id);
      open();
    }
    return Promise.resolve();
  }

  private _mimeType: string;
}

export const shellRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [SHELL_MIME],
  createRenderer: options => new ShellRenderer(options)
};

/** The sidebar's "Shell on rank" row for a running context (`path`: its folder). */
export function shellControls(
  path: string,
  context: string,
  panelClass: string
): HTMLElement {
  const row = el('div', `${panelClass}-shell`);
  const label = el('label', `${panelClass}-shellLabel`, 'Shell on rank ');
  const input = el('input', `${panelClass}-shellRank`);
  input.type = 'number';
  input.min = '0';
  input.value = '0';
  input.setAttribute('aria-label', `rank for a shell in context ${context}`);
  label.appendChild(input);
  const button = el('button', `${panelClass}-shellOpen jp-mod-styled`, 'Open');
  button.title =
    'Open a terminal with a shell on this rank (MONARCH_RANK_* set)';
  const status = el('span', `${panelClass}-shellStatus`);
  status.setAttribute('role', 'status');
  const open = (): void => {
    const rank = parseRank(input.value);
    if (rank === null) {
      status.textContent = 'a rank is 0, 1, …';
      return;
    }
    status.textContent = 'opening…';
    requestShell({ path, context, rank }, message => {
      status.textContent = message;
    });
  };
  button.addEventListener('click', event => {
    event.stopPropagation();
    open();
  });
  for (const node of [row, input]) {
    node.addEventListener('click', event => event.stopPropagation());
  }
  input.addEventListener('keydown', event => {
    event.stopPropagation(); // the row's Enter/Space toggles the context
    if (event.key === 'Enter') {
      open();
    }
  });
  row.append(label, button, status);
  return row;
}
