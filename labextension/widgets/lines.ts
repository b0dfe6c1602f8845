/** The run grid's lines, kept per rank in the browser as the kernel sends them. */

import type { Line } from './types';

export const KEEP = 500; // lines kept per rank in the browser

/** A "lines" message: new lines, lines not sent, and the tails of ranks newly drawn. */
export interface ILinesMessage {
  kind?: string;
  lines?: Record<string, Line[]>;
  dropped?: Record<string, number>;
  /** a rank drawn again: its tail, replacing what was kept */
  tails?: Record<string, Line[]>;
  /** lines before those tails */
  earlier?: Record<string, number>;
}

export class LineStore {
  readonly buffers: Map<number, Line[]> = new Map(); // rank -> [[stream, text], ...]
  readonly dropped: Map<number, number> = new Map(); // rank -> lines not received
  readonly received: Map<number, number> = new Map(); // rank -> lines appended in all (the detail pane appends the new)
  readonly resets: Map<number, number> = new Map(); // rank -> times its kept lines were replaced (the pane is redrawn)

  constructor(tails: Record<string, Line[]>) {
    for (const [rank, lines] of Object.entries(tails)) {
      this.buffers.set(Number(rank), lines.slice());
    }
  }

  /** A rank's last line kept, '' before any. */
  lastLine(rank: number): string {
    const lines = this.buffers.get(rank);
    return lines && lines.length ? lines[lines.length - 1][1] : '';
  }

  /** Keep what a "lines" message brings. */
  receive(msg: ILinesMessage): void {
    this.replaceTails(msg.tails || {}, msg.earlier || {});
    this.append(msg.lines || {});
    for (const [rank, n] of Object.entries(msg.dropped || {})) {
      this.dropped.set(Number(rank), (this.dropped.get(Number(rank)) || 0) + n);
    }
  }

  /** Ranks drawn again: their tails, anew (and the lines before them, not shown). */
  private replaceTails(
    tails: Record<string, Line[]>,
    earlier: Record<string, number>
  ): void {
    for (const [rank, lines] of Object.entries(tails)) {
      this.buffers.set(Number(rank), lines.slice(-KEEP));
      this.dropped.set(Number(rank), earlier[rank] || 0);
      this.resets.set(Number(rank), (this.resets.get(Number(rank)) || 0) + 1);
    }
  }

  /** New lines, after those kept (the last KEEP of them kept). */
  private append(news: Record<string, Line[]>): void {
    const { buffers, dropped, received } = this;
    for (const [rank, lines] of Object.entries(news)) {
      const key = Number(rank);
      const kept = buffers.get(key) || [];
      kept.push(...lines);
      if (kept.length > KEEP) {
        dropped.set(key, (dropped.get(key) || 0) + kept.length - KEEP);
        kept.splice(0, kept.length - KEEP);
      }
      buffers.set(key, kept);
      received.set(key, (received.get(key) || 0) + lines.length);
    }
  }
}
