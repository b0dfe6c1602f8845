// Front end of monarch_jupyter.widgets.run.RunWidget (anywidget ES module).
//
// Tiles come from the synced `tiles` list: the tiles this view draws (a page of
// `limit`, failing first, of `tile_count`; or one per group), all of them when any
// changed, plus `detail`, the selected rank's tile when it is not drawn; the view's
// `grouped`, `failing_only`, `limit` and `selected` tell the kernel what to send
// (`failing` is decided by the kernel side, from the one status schema). Lines come
// as custom messages {kind: "lines", lines: {rank: [[stream, text], ...]}, dropped:
// {rank: n}, tails?: {rank: lines}, earlier?: {rank: n}} for the ranks drawn (a
// rank newly drawn: its tail, replacing what was kept) and are kept here, per rank,
// so clicking a tile works while the cell is still running. Redraws are
// coalesced to one per animation frame. Bundled by esbuild (jlpm build:widgets)
// with src/ansi.ts and src/dom.ts into monarch_jupyter/widgets/run.js, one ES
// module as anywidget loads it; tested by labextension's jest tests.

import { appendAnsi } from '../src/ansi';
import { el } from '../src/dom';
import {
  expandRuns,
  formatSeconds,
  plainText,
  statusText,
  usageText
} from './format';
import { interruptKernel } from './server';
import type { IGroup, Line, IModel, ITile, IUsage } from './types';

export { ansiSegments, appendAnsi } from '../src/ansi';
export {
  expandRuns,
  formatBytes,
  formatSeconds,
  plainText,
  statusText,
  usageText
} from './format';

const KEEP = 500; // lines kept per rank in the browser
const PAGE = 200; // tiles drawn at most, then a button draws this many more (a bounded DOM)
// Tiles rewritten by one frame at most (beyond those that must show a change at once); the rest
// follow in the next frames. Each tile's new texts are laid out again: 200 of them were 30–48 ms
// of layout a frame on a slow 2-core machine, and a tile 4 frames late is not seen.
export const WRITES_PER_FRAME = 50;
const USAGE_EVERY = 2000; // ms between resources requests while the grid is visible
const STACKS_KEPT = 3; // stacks answers shown at once (the newest first)

/**
 * Draw the grid into `root` and follow the model; returns the clean-up function.
 * @param } view
 */
// eslint-disable-next-line max-lines-per-function -- one closure, written before these limits
function render({ model, el: root }: { model: IModel; el: HTMLElement }) {
  const buffers: Map<number, Line[]> = new Map(); // rank -> [[stream, text], ...]
  const dropped: Map<number, number> = new Map(); // rank -> lines not received
  const received: Map<number, number> = new Map(); // rank -> lines appended in all (the detail pane appends the new)
  const resets: Map<number, number> = new Map(); // rank -> times its kept lines were replaced (the pane is redrawn)
  const tails: Record<string, Line[]> = model.get('tails') || {};
  for (const [rank, lines] of Object.entries(tails)) {
    buffers.set(Number(rank), lines.slice());
  }

  root.classList.add('monarch-run-widget');
  const header = el('div', 'monarch-run-header');
  const title = el('span', 'monarch-run-title');
  const summary = el('span', 'monarch-run-summary');
  const filterLabel = el('label', 'monarch-run-filter');
  const filter = el('input');
  filter.type = 'checkbox';
  filterLabel.append(filter, ' failing only');
  const groupLabel = el('label', 'monarch-run-groupToggle');
  const groupBox = el('input');
  groupBox.type = 'checkbox';
  groupLabel.append(groupBox, ' group identical');
  groupLabel.title =
    'One tile for the ranks whose output is identical so far (as --group folds the text)';
  const stop = el('button', 'monarch-run-stop', 'Stop');
  stop.title =
    'Interrupt the kernel: stops the processes on every rank (as Ctrl-C / the ■ button)';
  const note = el('span', 'monarch-run-note');
  header.append(title, summary, filterLabel, groupLabel, stop, note);
  const grid = el('div', 'monarch-run-grid');
  grid.setAttribute('role', 'group');
  grid.setAttribute('aria-label', 'ranks');
  const more = el('button', 'monarch-run-more');
  more.hidden = true;
  const stacksPane = el('div', 'monarch-run-stacks');
  stacksPane.setAttribute('aria-live', 'polite');
  const detail = el('div', 'monarch-run-detail');
  detail.setAttribute('aria-live', 'polite');
  root.append(header, grid, more, stacksPane, detail);
  const pageLimit = () => model.get('limit') || PAGE; // tiles drawn: grows by PAGE with `more`
  const usage: Map<number, IUsage> = new Map(); // tile index -> its latest resources sample
  let requests = 0; // ids of this view's requests

  let frame = 0;
  let refocus = -1; // a tile to give the focus back to after the next redraw
  let generation = 0; // bumped by each change to draw: a tile written since is up to date
  let cursor = 0; // where in the shown tiles the next frame's writes start (round robin)
  const keepDrawing = () => {
    if (!frame) {
      frame = requestAnimationFrame(draw);
    }
  };
  const schedule = () => {
    generation += 1;
    keepDrawing();
  };

  function lastLine(rank: number) {
    const lines = buffers.get(rank);
    return lines && lines.length ? lines[lines.length - 1][1] : '';
  }

  /**
   * Ask the kernel for these tiles' stacks; the answer lands in the stacks pane.
   * @param label
   * @param ranks
   */
  function askStacks(label: string, ranks: number[]) {
    const id = `stacks-${++requests}-${Date.now()}`;
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
    model.send({ kind: 'stacks', id, ranks });
  }

  function showStacks(msg: { id?: string; text?: string; error?: string }) {
    const box = Array.from(stacksPane.children).find(
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
   * A drawn tile: its node, kept and updated in place while the tile stays on the page (a
   * redraw of 200 tiles that rebuilt them all was 1,613 new nodes a change: frames over 50 ms).
   */
  interface IDrawn {
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
  let drawn: Map<number, IDrawn> = new Map(); // tile rank -> its node, for the tiles on the page

  /**
   * Set a node's text only when it differs: an unchanged assignment still costs a relayout.
   * A node holding one text node keeps it and changes its data: replacing it (textContent)
   * inserts a node, and JupyterLab's `:has()` rules on the output area then restyle the cell.
   * @param node
   * @param text
   */
  function setText(node: HTMLElement, text: string) {
    const only = node.firstChild;
    if (only && only === node.lastChild && only.nodeType === Node.TEXT_NODE) {
      const textNode = only as Text;
      if (textNode.data !== text) {
        textNode.data = text;
      }
    } else if (node.textContent !== text) {
      node.textContent = text;
    }
  }

  /**
   * @param node
   * @param name
   * @param value
   */
  function setAttr(node: HTMLElement, name: string, value: string) {
    if (node.getAttribute(name) !== value) {
      node.setAttribute(name, value);
    }
  }

  /** The ranks a tile stands for, as its handlers need them */
  function members(entry: IDrawn) {
    return entry.group ? expandRuns(entry.group.ranks) : [entry.tile.rank];
  }

  function labelOf(entry: IDrawn) {
    return entry.group ? entry.group.label : entry.tile.label;
  }

  /** A tile's node with its handlers, filled by updateTile */
  function createTile(): IDrawn {
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
    if (model.get('can_stacks')) {
      // not a <button>: the tile is the keyboard's control (S on it asks too, its label says
      // so), and an interactive control inside it would be a nested one (axe: nested-interactive)
      const button = el('span', 'monarch-run-stacksButton', 'Stacks');
      button.setAttribute('aria-hidden', 'true');
      button.addEventListener('click', event => {
        event.stopPropagation();
        askStacks(labelOf(entry), members(entry));
      });
      node.addEventListener('keydown', event => {
        if (event.key === 's' || event.key === 'S') {
          askStacks(labelOf(entry), members(entry));
        }
      });
      head.append(button);
      entry.stacks = button;
    }
    // a button for the keyboard and screen readers: Tab to it, Enter or Space shows its output
    node.tabIndex = 0;
    node.setAttribute('role', 'button');
    const toggle = () => {
      const rank = entry.tile.rank;
      model.set('selected', rank === model.get('selected') ? -1 : rank);
      model.save_changes();
      refocus = rank; // keep the focus on this tile across the redraw
      schedule();
    };
    node.addEventListener('click', toggle);
    node.addEventListener('keydown', event => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        toggle();
      }
    });
    return entry;
  }

  /**
   * Show `tile` (standing for `group`, several ranks, when given) in `entry`'s node.
   * @param entry
   * @param tile
   * @param now  epoch seconds
   * @param [group]
   */
  // eslint-disable-next-line complexity -- one closure, written before these limits
  function updateTile(entry: IDrawn, tile: ITile, now: number, group?: IGroup) {
    entry.tile = tile;
    entry.group = group;
    const { node } = entry;
    const label = labelOf(entry);
    const sample = usage.get(tile.rank);
    const idle = group ? group.idle : sample?.idle;
    const selected = tile.rank === model.get('selected');
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
    setAttr(node, 'class', className);
    setAttr(node, 'data-rank', String(tile.rank));
    setAttr(node, 'data-status', tile.status);
    if (group) {
      setAttr(node, 'data-count', String(group.count));
    } else {
      node.removeAttribute('data-count');
    }
    setAttr(node, 'title', tile.error || `${label}: click to show its output`);
    setText(entry.label, label);
    setText(
      entry.status,
      tile.quiet_since
        ? `quiet ${formatSeconds(now - tile.quiet_since)}`
        : idle && tile.status === 'running'
          ? 'idle (0% cpu)'
          : statusText(tile)
    );
    let seconds = tile.duration;
    if (
      (seconds === null || seconds === undefined) &&
      tile.status === 'running' &&
      tile.started
    ) {
      seconds = Math.max(0, now - tile.started);
    }
    setText(entry.elapsed, formatSeconds(seconds));
    setText(entry.last, tile.error || plainText(lastLine(tile.rank)));
    const resources = usageText(sample);
    if (resources && !entry.usage) {
      entry.usage = el('div', 'monarch-run-usage');
      node.append(entry.usage);
    } else if (!resources && entry.usage) {
      entry.usage.remove();
      entry.usage = null;
    }
    if (entry.usage) {
      setText(entry.usage, resources);
    }
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
        (model.get('can_stacks') ? '; S shows its stacks' : '')
    );
  }

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
  let pane: IPane | null = null;
  // eslint-disable-next-line complexity -- one closure, written before these limits
  function drawDetail(tiles: ITile[]) {
    const rank = model.get('selected');
    const aside: ITile | null = model.get('detail');
    const tile =
      tiles.find(t => t && t.rank === rank) ||
      (aside && aside.rank === rank ? aside : undefined);
    if (!tile) {
      if (pane || detail.childNodes.length) {
        detail.textContent = '';
        pane = null;
      }
      return;
    }
    const group = shownGroups().find(
      g => g.count > 1 && g.ranks.some(([a, b]) => a <= rank && rank <= b)
    );
    const headText = `${group ? `${group.label}, identical so far` : tile.label} · ${statusText(tile)}`;
    const lost = dropped.get(rank) || 0;
    const reset = resets.get(rank) || 0;
    const total = received.get(rank) || 0;
    if (pane && pane.rank === rank && pane.reset === reset) {
      updatePane(pane, headText, lost, total);
      return;
    }
    // another rank, or its lines replaced: drawn anew, following its end
    detail.textContent = '';
    const head = el('div', 'monarch-run-detailHead', headText);
    const pre = el('pre', 'monarch-run-output');
    detail.append(head, pre);
    pane = { rank, reset, total, head, dropped: null, pre };
    updatePane(pane, headText, lost, total);
    appendLines(pre, buffers.get(rank) || []);
    const place = () => {
      pre.scrollTop = pre.scrollHeight;
    };
    place();
    if (!pre.isConnected) {
      requestAnimationFrame(place);
    } // a view being attached right now
  }

  /**
   * Bring the pane up to date: its head, its count of lines not shown, the lines received since.
   * @param shown
   * @param headText
   * @param lost
   * @param total
   */
  function updatePane(
    shown: IPane,
    headText: string,
    lost: number,
    total: number
  ) {
    setText(shown.head, headText);
    if (lost && !shown.dropped) {
      shown.dropped = el('div', 'monarch-run-dropped');
      shown.head.after(shown.dropped);
    } else if (!lost && shown.dropped) {
      shown.dropped.remove();
      shown.dropped = null;
    }
    if (shown.dropped) {
      setText(shown.dropped, `${lost} earlier lines not shown`);
    }
    const fresh = Math.min(total - shown.total, KEEP);
    shown.total = total;
    if (fresh <= 0) {
      return;
    }
    // Follow the output while the reader is at its end; keep their place otherwise.
    const { pre } = shown;
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    appendLines(pre, (buffers.get(shown.rank) || []).slice(-fresh));
    if (atEnd) {
      pre.scrollTop = pre.scrollHeight;
    }
  }

  /**
   * @param pre
   * @param lines
   */
  function appendLines(pre: HTMLElement, lines: Line[]) {
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

  // eslint-disable-next-line complexity, max-lines-per-function -- one closure, written before these limits
  function draw() {
    frame = 0;
    const synced: ITile[] = model.get('tiles') || [];
    const tiles = synced.filter(t => t && t.label !== undefined);
    const now = Date.now() / 1000;
    setText(title, model.get('title'));
    setText(summary, model.get('summary'));
    setAttr(summary, 'title', model.get('summary') || '');
    filter.checked = model.get('failing_only');
    const finished = model.get('finished');
    stop.disabled =
      finished || (!model.get('detached') && !model.get('kernel_id'));
    root.classList.toggle('monarch-run-finished', finished);
    root.classList.toggle(
      'monarch-run-detached',
      Boolean(model.get('detached'))
    );
    groupBox.checked = model.get('grouped');
    const byRank = new Map(tiles.map(t => [t.rank, t]));
    let shown: [ITile, IGroup | undefined][] = [];
    const limit = pageLimit();
    const groups = shownGroups();
    let total = 0;
    if (groups.length) {
      const eligible = groups.filter(g => !filter.checked || g.failing);
      total = eligible.length;
      for (const g of eligible) {
        const t = byRank.get(g.rank); // the kernel sends the first `limit` groups' tiles
        if (t && shown.length < limit) {
          shown.push([t, g.count > 1 ? g : undefined]);
        }
      }
    } else {
      // rank order; past one page failing ranks first (the first page is what is drawn)
      let ordered = filter.checked ? tiles.filter(t => t.failing) : tiles;
      if (!filter.checked && tiles.length > limit) {
        ordered = [
          ...tiles.filter(t => t.failing),
          ...tiles.filter(t => !t.failing)
        ];
      }
      shown = ordered.map(t => [t, undefined]);
      // the kernel sends one page of the order; tile_count is the whole order's length
      total = Math.max(shown.length, model.get('tile_count') || 0);
    }
    shown = shown.slice(0, limit);
    more.hidden = total <= shown.length;
    setText(
      more,
      `${total - shown.length} more tiles: show ${Math.min(PAGE, total - shown.length)} more`
    );
    const focused = grid.contains(document.activeElement)
      ? Number((document.activeElement as HTMLElement).dataset.rank)
      : refocus;
    refocus = -1;
    if (!shown.length) {
      drawn.clear();
      grid.replaceChildren(
        el(
          'div',
          'monarch-run-empty',
          filter.checked ? 'No failing ranks.' : 'No ranks.'
        )
      );
    } else {
      // the tiles on the page keep their nodes: only what changed in them is written
      const canStacks = Boolean(model.get('can_stacks'));
      const next: Map<number, IDrawn> = new Map(); // the tiles no longer shown let go of their nodes
      const placed: [ITile, IGroup | undefined, IDrawn][] = []; // the shown tiles that have a node this frame, in order
      let made = 0;
      let behind = false; // some tile is still to be made or written: another frame follows
      for (const [tile, group] of shown) {
        let entry = drawn.get(tile.rank);
        if (!entry || Boolean(entry.stacks) !== canStacks) {
          if (made >= WRITES_PER_FRAME) {
            behind = true; // made in a next frame (a page of 200 new tiles is 1,600 nodes)
            continue;
          }
          made += 1;
          entry = createTile();
        }
        next.set(tile.rank, entry);
        placed.push([tile, group, entry]);
      }
      drawn = next;
      // written now: new tiles, a changed status, the selected and focused ones; the others
      // WRITES_PER_FRAME a frame from where the last frame stopped
      const selectedRank = model.get('selected');
      let budget = WRITES_PER_FRAME;
      let resume = -1;
      const n = placed.length;
      const start = cursor < n ? cursor : 0;
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
          updateTile(entry, tile, now, group);
          entry.written = generation;
        } else if (resume < 0) {
          resume = i;
        }
      }
      cursor = resume < 0 ? 0 : resume;
      if (behind || resume >= 0) {
        keepDrawing();
      }
      // the order: only the nodes out of place move (a rank that failed goes first, the rest stay
      // put; moving all 200 lays them all out again), then what is no longer shown goes
      const current = grid.children;
      placed.forEach(([, , entry], i) => {
        if (current[i] !== entry.node) {
          grid.insertBefore(entry.node, current[i] || null);
        }
      });
      while (current.length > placed.length) {
        (grid.lastElementChild as Element).remove();
      }
      const target = drawn.get(focused);
      if (target && document.activeElement !== target.node) {
        target.node.focus({ preventScroll: true });
      }
    }
    drawDetail(tiles);
  }

  /** The groups to draw ([] when not grouping) */
  function shownGroups(): IGroup[] {
    return model.get('grouped') ? model.get('groups') || [] : [];
  }

  groupBox.addEventListener('change', () => {
    model.set('grouped', groupBox.checked);
    model.save_changes();
    schedule();
  });
  more.addEventListener('click', () => {
    model.set('limit', pageLimit() + PAGE);
    model.save_changes();
    schedule();
  });
  filter.addEventListener('change', () => {
    model.set('failing_only', filter.checked);
    model.save_changes();
    schedule();
  });
  stop.addEventListener('click', async () => {
    stop.disabled = true;
    note.textContent = 'stopping…';
    try {
      if (model.get('detached')) {
        model.send({ kind: 'stop' }); // the kernel is idle: it reads this and stops the run
        return;
      }
      await interruptKernel(model.get('kernel_id'));
    } catch (error) {
      note.textContent = String(error);
      stop.disabled = false;
    }
  });
  type LinesMessage = {
    kind?: string;
    lines?: Record<string, Line[]>;
    dropped?: Record<string, number>;
  };
  // eslint-disable-next-line complexity -- one closure, written before these limits
  const onLines = (msg: LinesMessage) => {
    if (msg && msg.kind === 'stacks') {
      showStacks(msg as any);
      return;
    }
    if (msg && msg.kind === 'usage') {
      onUsage(msg as any);
      return;
    }
    if (!msg || msg.kind !== 'lines') {
      return;
    }
    const tailsNow: Record<string, Line[]> = (msg as any).tails || {};
    const earlier: Record<string, number> = (msg as any).earlier || {};
    for (const [rank, lines] of Object.entries(tailsNow)) {
      buffers.set(Number(rank), lines.slice(-KEEP)); // a rank drawn again: its tail, anew
      dropped.set(Number(rank), earlier[rank] || 0);
      resets.set(Number(rank), (resets.get(Number(rank)) || 0) + 1);
    }
    for (const [rank, lines] of Object.entries(msg.lines || {})) {
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
    for (const [rank, n] of Object.entries(msg.dropped || {})) {
      dropped.set(Number(rank), (dropped.get(Number(rank)) || 0) + n);
    }
    schedule();
  };
  // Resources: asked of the kernel only while this view is on screen and the run goes on.
  let visible = typeof IntersectionObserver === 'undefined';
  const watcher =
    typeof IntersectionObserver === 'undefined'
      ? null
      : new IntersectionObserver(entries => {
          visible = entries.some(entry => entry.isIntersecting);
        });
  watcher?.observe(root);
  let asking = '';
  let askedAt = 0;
  const askUsage = () => {
    const now = Date.now();
    if (
      !model.get('can_usage') ||
      model.get('finished') ||
      !visible ||
      document.visibilityState === 'hidden' ||
      (asking && now - askedAt < 30000)
    ) {
      return;
    }
    asking = `usage-${++requests}-${now}`;
    askedAt = now;
    model.send({ kind: 'usage', id: asking });
  };

  const onUsage = (msg: { id?: string; ranks?: Record<string, IUsage> }) => {
    if (msg.id === asking) {
      asking = '';
    }
    for (const [rank, sample] of Object.entries(msg.ranks || {})) {
      usage.set(Number(rank), sample);
    }
    schedule();
  };
  const poller = setInterval(askUsage, USAGE_EVERY);
  const onFinished = () => {
    if (model.get('finished')) {
      note.textContent = '';
    }
    schedule();
  };
  model.on('msg:custom', onLines);
  model.on('change:tiles', schedule);
  model.on('change:summary', schedule);
  model.on('change:finished', onFinished);
  model.on('change:selected', schedule);
  model.on('change:groups', schedule);
  model.on('change:grouped', schedule);
  model.on('change:detail', schedule);
  model.on('change:tile_count', schedule);
  model.on('change:limit', schedule);
  // elapsed times of running ranks tick once a second
  const ticker = setInterval(() => {
    if (!model.get('finished')) {
      schedule();
    }
  }, 1000);
  draw();
  if (!model.get('finished') && !model.get('shown')) {
    // the kernel streams the lines until a view says it shows them: then they are the grid's
    model.set('shown', true);
    model.save_changes();
  }
  return () => {
    clearInterval(ticker);
    clearInterval(poller);
    watcher?.disconnect();
    model.off('change:groups', schedule);
    model.off('change:grouped', schedule);
    model.off('change:detail', schedule);
    model.off('change:tile_count', schedule);
    model.off('change:limit', schedule);
    if (frame) {
      cancelAnimationFrame(frame);
    }
    model.off('msg:custom', onLines);
    model.off('change:tiles', schedule);
    model.off('change:summary', schedule);
    model.off('change:finished', onFinished);
    model.off('change:selected', schedule);
  };
}

export default { render };
