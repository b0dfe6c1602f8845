/**
 * The window event between a shell's buttons (shell.ts: the renderer and the
 * sidebar's) and the plugin that opens the terminal (index.ts, which has the
 * app). Apart from the renderer so the plugin's start loads only this.
 */

/** The window event asking the plugin for a terminal: its detail is an `IShellEvent`. */
export const OPEN_SHELL_EVENT = 'monarch-jupyter:open-shell';

/** What the server's shell route takes: a folder (relative `path` or absolute `folder`) and a rank. */
export interface IShellRequest {
  path?: string;
  folder?: string;
  context: string | null;
  rank: number;
  mesh?: string | null;
}

export interface IShellEvent {
  request: IShellRequest;
  /** Called with a line saying what happened ('' when the terminal opened). */
  report: (message: string) => void;
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
