/** What the run grid asks of the kernel by message: each request with an id of this view. */

import { el } from '../src/dom';
import type { IModel, IUsage } from './types';

const STACKS_KEPT = 3; // stacks answers shown at once (the newest first)

/** A stacks answer, {kind: "stacks", id, text | error}. */
export interface IStacksAnswer {
  id?: string;
  text?: string;
  error?: string;
}

/** A resources answer, {kind: "usage", id, ranks: {tile index: sample}} (or error). */
export interface IUsageAnswer {
  id?: string;
  ranks?: Record<string, IUsage>;
}

export class Requests {
  /** tile index -> its latest resources sample */
  readonly usage: Map<number, IUsage> = new Map();
  private count = 0; // ids of this view's requests
  private asking = ''; // the resources request not answered yet
  private askedAt = 0;

  constructor(
    private readonly model: IModel,
    private readonly stacksPane: HTMLElement
  ) {}

  /** A new request id: `${kind}-${n}-${now}`. */
  nextId(kind: string, now: number = Date.now()): string {
    return `${kind}-${++this.count}-${now}`;
  }

  /** Ask the kernel for these tiles' stacks; the answer lands in the stacks pane. */
  askStacks(label: string, ranks: number[]): void {
    const { stacksPane } = this;
    const id = this.nextId('stacks');
    const box = el('details', 'monarch-run-stacksBox');
    box.open = true;
    box.dataset.id = id;
    box.append(
      el('summary', 'monarch-run-stacksHead', `stacks of ${label}`),
      el('div', 'monarch-run-note', 'asking the hosts…')
    );
    stacksPane.prepend(box);
    while (stacksPane.childElementCount > STACKS_KEPT) {
      stacksPane.lastElementChild?.remove();
    }
    this.model.send({ kind: 'stacks', id, ranks });
  }

  /** Show a stacks answer in the box that asked for it. */
  showStacks(msg: IStacksAnswer): void {
    const box = Array.from(this.stacksPane.children).find(
      node => (node as HTMLElement).dataset.id === msg.id
    );
    if (!box) {
      return;
    }
    box.querySelector('.monarch-run-note')?.remove();
    box.append(
      msg.error
        ? el('div', 'monarch-run-stacksError', msg.error)
        : el('pre', 'monarch-run-output monarch-run-stacksText', msg.text || '')
    );
  }

  /**
   * Ask the kernel for the ranks' resources, unless the grid cannot show them, is off screen
   * (`visible`), or an answer is awaited (for 30 s at most).
   */
  askUsage(visible: boolean): void {
    const { model } = this;
    const now = Date.now();
    if (
      !model.get('can_usage') ||
      model.get('finished') ||
      !visible ||
      document.visibilityState === 'hidden' ||
      (this.asking && now - this.askedAt < 30000)
    ) {
      return;
    }
    this.asking = this.nextId('usage', now);
    this.askedAt = now;
    model.send({ kind: 'usage', id: this.asking });
  }

  /** Keep a resources answer's samples. */
  receiveUsage(msg: IUsageAnswer): void {
    if (msg.id === this.asking) {
      this.asking = '';
    }
    for (const [rank, sample] of Object.entries(msg.ranks || {})) {
      this.usage.set(Number(rank), sample);
    }
  }
}
