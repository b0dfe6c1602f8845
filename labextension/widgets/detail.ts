/** The run grid's detail pane: the selected rank's output under the tiles. */

import { appendAnsi } from '../src/ansi';
import { el } from '../src/dom';
import { optionalLine, setText } from './nodes';
import { statusText } from './format';
import { KEEP, LineStore } from './lines';
import type { IGroup, IModel, ITile, Line } from './types';

/**
 * The detail pane as drawn: new lines of its rank are appended, the rest redrawn only when
 * another rank is shown or its kept lines were replaced.
 */
interface IPane {
  rank: number;
  /** resets.get(rank) when drawn */
  reset: number;
  /** received.get(rank) when drawn */
  total: number;
  head: HTMLElement;
  dropped: HTMLElement | null;
  pre: HTMLElement;
}

/** The selected rank's output: drawn once, then appended to. */
export class DetailPane {
  private pane: IPane | null = null;

  constructor(
    private readonly detail: HTMLElement,
    private readonly model: IModel,
    private readonly store: LineStore
  ) {}

  /** Show the selected rank's lines (`groups`: the groups drawn, for its head). */
  draw(tiles: ITile[], groups: IGroup[]): void {
    const { store } = this;
    const rank = this.model.get('selected');
    const tile = this.selected(tiles, rank);
    if (!tile) {
      this.clear();
      return;
    }
    const headText = headOf(tile, rank, groups);
    const lost = store.dropped.get(rank) || 0;
    const reset = store.resets.get(rank) || 0;
    const total = store.received.get(rank) || 0;
    if (this.pane && this.pane.rank === rank && this.pane.reset === reset) {
      this.update(this.pane, headText, lost, total);
      return;
    }
    this.drawAnew(rank, reset, total, headText, lost);
  }

  /** No rank selected (or none known): an empty pane. */
  private clear(): void {
    if (this.pane || this.detail.childNodes.length) {
      this.detail.textContent = '';
      this.pane = null;
    }
  }

  /** Another rank, or its lines replaced: drawn anew, following its end. */
  private drawAnew(
    rank: number,
    reset: number,
    total: number,
    headText: string,
    lost: number
  ): void {
    const { detail } = this;
    detail.textContent = '';
    const head = el('div', 'monarch-run-detailHead', headText);
    const pre = el('pre', 'monarch-run-output');
    detail.append(head, pre);
    this.pane = { rank, reset, total, head, dropped: null, pre };
    this.update(this.pane, headText, lost, total);
    appendLines(pre, this.store.buffers.get(rank) || []);
    const place = () => {
      pre.scrollTop = pre.scrollHeight;
    };
    place();
    if (!pre.isConnected) {
      requestAnimationFrame(place);
    } // a view being attached right now
  }

  /** The selected rank's tile: drawn, or `detail` (sent when it is not drawn). */
  private selected(tiles: ITile[], rank: number): ITile | undefined {
    const aside: ITile | null = this.model.get('detail');
    return (
      tiles.find(t => t && t.rank === rank) ||
      (aside && aside.rank === rank ? aside : undefined)
    );
  }

  /** Bring the pane up to date: its head, its count of lines not shown, the lines received since. */
  private update(
    shown: IPane,
    headText: string,
    lost: number,
    total: number
  ): void {
    setText(shown.head, headText);
    shown.dropped = optionalLine(
      shown.dropped,
      lost ? `${lost} earlier lines not shown` : '',
      'monarch-run-dropped',
      made => shown.head.after(made)
    );
    const fresh = Math.min(total - shown.total, KEEP);
    shown.total = total;
    if (fresh <= 0) {
      return;
    }
    // Follow the output while the reader is at its end; keep their place otherwise.
    const { pre } = shown;
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    appendLines(pre, (this.store.buffers.get(shown.rank) || []).slice(-fresh));
    if (atEnd) {
      pre.scrollTop = pre.scrollHeight;
    }
  }
}

/** The pane's head: the rank (or its group of identical ranks) and its status. */
function headOf(tile: ITile, rank: number, groups: IGroup[]): string {
  const group = groups.find(
    g => g.count > 1 && g.ranks.some(([a, b]) => a <= rank && rank <= b)
  );
  return `${group ? `${group.label}, identical so far` : tile.label} · ${statusText(tile)}`;
}

/** Append `lines` to `pre`, keeping its last KEEP (or its "no output yet"). */
function appendLines(pre: HTMLElement, lines: Line[]): void {
  if (lines.length) {
    pre.querySelector('.monarch-run-empty')?.remove();
  }
  for (const [stream, text] of lines) {
    const line = el('div', `monarch-run-line monarch-run-${stream}`);
    appendAnsi(line, text);
    pre.append(line);
  }
  while (pre.childElementCount > KEEP) {
    pre.firstElementChild?.remove();
  }
  if (!pre.childNodes.length) {
    pre.append(el('div', 'monarch-run-empty', '(no output yet)'));
  }
}
