/** The run grid's tiles on the page: which are shown, and their nodes kept in order. */

import { el } from '../src/dom';
import { createTile, IDrawn, ITileView, updateTile } from './tile';
import type { IGroup, ITile } from './types';

// Tiles rewritten by one frame at most (beyond those that must show a change at once); the rest
// follow in the next frames. Each tile's new texts are laid out again: 200 of them were 30–48 ms
// of layout a frame on a slow 2-core machine, and a tile 4 frames late is not seen.
export const WRITES_PER_FRAME = 50;

/** A tile to show: the tile, and the group it stands for (several ranks). */
export type Shown = [ITile, IGroup | undefined];

/** A shown tile that has a node this frame. */
type Placed = [ITile, IGroup | undefined, IDrawn];

/** What the grid shows of a page of `limit`, and how many tiles its whole order has. */
export interface IShown {
  shown: Shown[];
  total: number;
}

/**
 * The tiles to draw: one per group when grouping (`groups` not empty), else one per rank.
 * @param tileCount  the whole order's length, as the kernel counts it
 */
export function shownTiles(
  tiles: ITile[],
  groups: IGroup[],
  failingOnly: boolean,
  limit: number,
  tileCount: number
): IShown {
  const { shown, total } = groups.length
    ? groupTiles(tiles, groups, failingOnly, limit)
    : rankTiles(tiles, failingOnly, limit, tileCount);
  return { shown: shown.slice(0, limit), total };
}

function groupTiles(
  tiles: ITile[],
  groups: IGroup[],
  failingOnly: boolean,
  limit: number
): IShown {
  const byRank = new Map(tiles.map(t => [t.rank, t]));
  const eligible = groups.filter(g => !failingOnly || g.failing);
  const shown: Shown[] = [];
  for (const g of eligible) {
    const t = byRank.get(g.rank); // the kernel sends the first `limit` groups' tiles
    if (t && shown.length < limit) {
      shown.push([t, g.count > 1 ? g : undefined]);
    }
  }
  return { shown, total: eligible.length };
}

function rankTiles(
  tiles: ITile[],
  failingOnly: boolean,
  limit: number,
  tileCount: number
): IShown {
  // rank order; past one page failing ranks first (the first page is what is drawn)
  let ordered = failingOnly ? tiles.filter(t => t.failing) : tiles;
  if (!failingOnly && tiles.length > limit) {
    ordered = [
      ...tiles.filter(t => t.failing),
      ...tiles.filter(t => !t.failing)
    ];
  }
  const shown: Shown[] = ordered.map(t => [t, undefined]);
  // the kernel sends one page of the order; tile_count is the whole order's length
  return { shown, total: Math.max(shown.length, tileCount) };
}

/** The grid's tile nodes: made once, written when they changed, moved only when out of place. */
export class TileGrid {
  private drawn: Map<number, IDrawn> = new Map(); // tile rank -> its node, for the tiles on the page
  private cursor = 0; // where in the shown tiles the next frame's writes start (round robin)

  constructor(
    private readonly grid: HTMLElement,
    private readonly view: ITileView
  ) {}

  /**
   * Draw `shown` (or `empty`, the text for none); true when another frame must follow.
   * @param now  epoch seconds
   * @param focused  the rank whose tile has (or gets back) the focus
   * @param generation  the change being drawn: a tile written in it is up to date
   */
  draw(
    shown: Shown[],
    empty: string,
    now: number,
    focused: number,
    generation: number
  ): boolean {
    if (!shown.length) {
      this.drawn.clear();
      this.grid.replaceChildren(el('div', 'monarch-run-empty', empty));
      return false;
    }
    // the tiles on the page keep their nodes: only what changed in them is written
    const { placed, behind } = this.nodes(shown);
    const resume = this.write(placed, now, focused, generation);
    this.cursor = resume < 0 ? 0 : resume;
    this.order(placed);
    const target = this.drawn.get(focused);
    if (target && document.activeElement !== target.node) {
      target.node.focus({ preventScroll: true });
    }
    return behind || resume >= 0;
  }

  /** The shown tiles' nodes: kept, or made (WRITES_PER_FRAME a frame at most). */
  private nodes(shown: Shown[]): { placed: Placed[]; behind: boolean } {
    const canStacks = Boolean(this.view.model.get('can_stacks'));
    const next: Map<number, IDrawn> = new Map(); // the tiles no longer shown let go of their nodes
    const placed: Placed[] = []; // the shown tiles that have a node this frame, in order
    let made = 0;
    let behind = false; // some tile is still to be made or written: another frame follows
    for (const [tile, group] of shown) {
      let entry = this.drawn.get(tile.rank);
      if (!entry || Boolean(entry.stacks) !== canStacks) {
        if (made >= WRITES_PER_FRAME) {
          behind = true; // made in a next frame (a page of 200 new tiles is 1,600 nodes)
          continue;
        }
        made += 1;
        entry = createTile(this.view);
      }
      next.set(tile.rank, entry);
      placed.push([tile, group, entry]);
    }
    this.drawn = next;
    return { placed, behind };
  }

  /**
   * Written now: new tiles, a changed status, the selected and focused ones; the others
   * WRITES_PER_FRAME a frame from where the last frame stopped. Returns where the next frame
   * resumes (-1: all written).
   */
  private write(
    placed: Placed[],
    now: number,
    focused: number,
    generation: number
  ): number {
    const selectedRank = this.view.model.get('selected');
    let budget = WRITES_PER_FRAME;
    let resume = -1;
    const n = placed.length;
    const start = this.cursor < n ? this.cursor : 0;
    for (let k = 0; k < n; k++) {
      const i = (start + k) % n;
      const [tile, group, entry] = placed[i];
      if (entry.written === generation) {
        continue;
      }
      const urgent =
        entry.written < 0 ||
        entry.tile.status !== tile.status ||
        tile.rank === focused ||
        (tile.rank === selectedRank) !==
          entry.node.classList.contains('monarch-run-selected');
      if (urgent || budget > 0) {
        budget -= urgent ? 0 : 1;
        updateTile(this.view, entry, tile, now, group);
        entry.written = generation;
      } else if (resume < 0) {
        resume = i;
      }
    }
    return resume;
  }

  /**
   * The order: only the nodes out of place move (a rank that failed goes first, the rest stay
   * put; moving all 200 lays them all out again), then what is no longer shown goes.
   */
  private order(placed: Placed[]): void {
    const { grid } = this;
    const current = grid.children;
    placed.forEach(([, , entry], i) => {
      if (current[i] !== entry.node) {
        grid.insertBefore(entry.node, current[i] || null);
      }
    });
    while (current.length > placed.length) {
      (grid.lastElementChild as Element).remove();
    }
  }
}
