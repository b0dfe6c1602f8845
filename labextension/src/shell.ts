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

import { el } from './dom';
import { PayloadRenderer } from './payloadRenderer';
import { requestShell } from './shellEvent';

export {
  IShellEvent,
  IShellRequest,
  OPEN_SHELL_EVENT,
  requestShell
} from './shellEvent';

export const SHELL_MIME = 'application/vnd.monarch.shell+json';

/** How long after `%remote shell` ran its output still opens a terminal by itself. */
export const FRESH_SECONDS = 120;

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

/** Outputs that opened their terminal already, in this page (re-renders must not open another). */
const OPENED = new Set<string>();

const CLASS = 'jp-MonarchShell';

/** Renders `%remote shell`'s payload: the command, a button, and the outcome line. */
export class ShellRenderer extends PayloadRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super(options, CLASS);
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const payload = parseShellPayload(this.freshPayload(model));
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
