/** One tile of the run grid: its node, made once and updated in place. */

import { el } from '../src/dom';
import { optionalLine, setText } from './nodes';
import {
  expandRuns,
  formatSeconds,
  plainText,
  statusText,
  usageText
} from './format';
import type { IGroup, IModel, ITile, IUsage } from './types';

/** What a tile reads of its grid and asks of it. */
export interface ITileView {
  model: IModel;
  /** tile index -> its latest resources sample */
  usage: Map<number, IUsage>;
  lastLine(rank: number): string;
  askStacks(label: string, ranks: number[]): void;
  /** show or hide this rank's output (the focus stays on its tile) */
  toggle(rank: number): void;
}

/**
 * A drawn tile: its node, kept and updated in place while the tile stays on the page (a
 * redraw of 200 tiles that rebuilt them all was 1,613 new nodes a change: frames over 50 ms).
 */
export interface IDrawn {
  node: HTMLDivElement;
  label: HTMLElement;
  status: HTMLElement;
  elapsed: HTMLElement;
  last: HTMLElement;
  usage: HTMLElement | null;
  /** its Stacks button (when the hosts can dump stacks) */
  stacks: HTMLElement | null;
  /** what the node shows now (its handlers read it when used) */
  tile: ITile;
  group: IGroup | undefined;
  /** the generation it was last written in (-1: never) */
  written: number;
}

/** Set an attribute only when it differs (as setText). */
export function setAttr(node: HTMLElement, name: string, value: string) {
  if (node.getAttribute(name) !== value) {
    node.setAttribute(name, value);
  }
}

/** The ranks a tile stands for, as its handlers need them */
export function members(entry: IDrawn) {
  return entry.group ? expandRuns(entry.group.ranks) : [entry.tile.rank];
}

export function labelOf(entry: IDrawn) {
  return entry.group ? entry.group.label : entry.tile.label;
}

/** A tile's node with its handlers, filled by updateTile */
export function createTile(view: ITileView): IDrawn {
  const node = el('div');
  const label = el('span', 'monarch-run-label');
  const status = el('span', 'monarch-run-status');
  const head = el('div', 'monarch-run-tileHead');
  head.append(label, status);
  const elapsed = el('span', 'monarch-run-elapsed');
  const last = el('span', 'monarch-run-last');
  const foot = el('div', 'monarch-run-tileFoot');
  foot.append(elapsed, last);
  node.append(head, foot);
  const entry: IDrawn = {
    node,
    label,
    status,
    elapsed,
    last,
    usage: null,
    stacks: null,
    tile: null as any,
    group: undefined,
    written: -1
  };
  if (view.model.get('can_stacks')) {
    // not a <button>: the tile is the keyboard's control (S on it asks too, its label says
    // so), and an interactive control inside it would be a nested one (axe: nested-interactive)
    const button = el('span', 'monarch-run-stacksButton', 'Stacks');
    button.setAttribute('aria-hidden', 'true');
    button.addEventListener('click', event => {
      event.stopPropagation();
      view.askStacks(labelOf(entry), members(entry));
    });
    node.addEventListener('keydown', event => {
      if (event.key === 's' || event.key === 'S') {
        view.askStacks(labelOf(entry), members(entry));
      }
    });
    head.append(button);
    entry.stacks = button;
  }
  // a button for the keyboard and screen readers: Tab to it, Enter or Space shows its output
  node.tabIndex = 0;
  node.setAttribute('role', 'button');
  const toggle = () => view.toggle(entry.tile.rank);
  node.addEventListener('click', toggle);
  node.addEventListener('keydown', event => {
    if (event.key === 'Enter' || event.key === ' ') {
      event.preventDefault();
      toggle();
    }
  });
  return entry;
}

/** The tile's classes: its status, a group, quiet or idle, selected. */
function tileClass(
  tile: ITile,
  group: IGroup | undefined,
  idle: boolean | undefined,
  selected: boolean
): string {
  let className = `monarch-run-tile monarch-run-${tile.status}`;
  if (group) {
    className += ' monarch-run-group';
  }
  if (tile.quiet_since || idle) {
    className += ' monarch-run-quiet';
  }
  if (selected) {
    className += ' monarch-run-selected';
  }
  return className;
}

/** The tile's status text: quiet for how long, idle, or its status. */
function statusLine(tile: ITile, idle: boolean | undefined, now: number) {
  if (tile.quiet_since) {
    return `quiet ${formatSeconds(now - tile.quiet_since)}`;
  }
  return idle && tile.status === 'running' ? 'idle (0% cpu)' : statusText(tile);
}

/** Its duration, or for how long it has run so far. */
function elapsedSeconds(tile: ITile, now: number) {
  const seconds = tile.duration;
  if (
    (seconds === null || seconds === undefined) &&
    tile.status === 'running' &&
    tile.started
  ) {
    return Math.max(0, now - tile.started);
  }
  return seconds;
}

/** Its resources line, made or removed as a sample comes or goes. */
function writeUsage(entry: IDrawn, sample: IUsage | undefined) {
  entry.usage = optionalLine(
    entry.usage,
    usageText(sample),
    'monarch-run-usage',
    made => entry.node.append(made)
  );
}

/** The node's attributes: class, rank, status, count, title. */
function writeAttributes(
  entry: IDrawn,
  className: string,
  label: string
): void {
  const { node, tile, group } = entry;
  setAttr(node, 'class', className);
  setAttr(node, 'data-rank', String(tile.rank));
  setAttr(node, 'data-status', tile.status);
  if (group) {
    setAttr(node, 'data-count', String(group.count));
  } else {
    node.removeAttribute('data-count');
  }
  setAttr(node, 'title', tile.error || `${label}: click to show its output`);
}

/** What the tile says to the keyboard and screen readers. */
function writeAria(
  entry: IDrawn,
  label: string,
  selected: boolean,
  canStacks: boolean
): void {
  const { node, tile } = entry;
  if (entry.stacks) {
    setAttr(
      entry.stacks,
      'title',
      `What ${label} is doing now: its processes' stacks (%remote stacks)`
    );
  }
  setAttr(node, 'aria-pressed', String(selected));
  setAttr(
    node,
    'aria-label',
    `${label}: ${statusText(tile)}${tile.error ? `, ${tile.error}` : ''}; ${selected ? 'hide' : 'show'} its output` +
      (canStacks ? '; S shows its stacks' : '')
  );
}

/**
 * Show `tile` (standing for `group`, several ranks, when given) in `entry`'s node.
 * @param now  epoch seconds
 */
export function updateTile(
  view: ITileView,
  entry: IDrawn,
  tile: ITile,
  now: number,
  group?: IGroup
) {
  const { model } = view;
  entry.tile = tile;
  entry.group = group;
  const label = labelOf(entry);
  const sample = view.usage.get(tile.rank);
  const idle = group ? group.idle : sample?.idle;
  const selected = tile.rank === model.get('selected');
  writeAttributes(entry, tileClass(tile, group, idle, selected), label);
  setText(entry.label, label);
  setText(entry.status, statusLine(tile, idle, now));
  setText(entry.elapsed, formatSeconds(elapsedSeconds(tile, now)));
  // a progress bar (\r-rewritten, unfinished) stands after the rank's last finished line
  setText(
    entry.last,
    tile.error || plainText(tile.progress || view.lastLine(tile.rank))
  );
  writeUsage(entry, sample);
  writeAria(entry, label, selected, Boolean(model.get('can_stacks')));
}
