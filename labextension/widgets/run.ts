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

import { el } from '../src/dom';
import { DetailPane } from './detail';
import { shownTiles, TileGrid } from './grid';
import { ILinesMessage, LineStore } from './lines';
import { IStacksAnswer, IUsageAnswer, Requests } from './requests';
import { interruptKernel } from './server';
import { setText } from './nodes';
import { ITileView, setAttr } from './tile';
import type { IGroup, IModel, ITile } from './types';

export { ansiSegments, appendAnsi } from '../src/ansi';
export {
  expandRuns,
  formatBytes,
  formatSeconds,
  plainText,
  statusText,
  usageText
} from './format';
export { WRITES_PER_FRAME } from './grid';

const PAGE = 200; // tiles drawn at most, then a button draws this many more (a bounded DOM)
const USAGE_EVERY = 2000; // ms between resources requests while the grid is visible

/** The grid's own nodes. */
interface IParts {
  root: HTMLElement;
  title: HTMLElement;
  summary: HTMLElement;
  filter: HTMLInputElement;
  groupBox: HTMLInputElement;
  stop: HTMLButtonElement;
  note: HTMLElement;
  grid: HTMLElement;
  more: HTMLButtonElement;
  stacksPane: HTMLElement;
  detail: HTMLElement;
}

/** A checkbox in its label. */
function checkbox(className: string, text: string) {
  const label = el('label', className);
  const box = el('input');
  box.type = 'checkbox';
  label.append(box, text);
  return { label, box };
}

/** The grid's header, tiles, stacks and detail pane, appended to `root`. */
function buildParts(root: HTMLElement): IParts {
  root.classList.add('monarch-run-widget');
  const header = el('div', 'monarch-run-header');
  const title = el('span', 'monarch-run-title');
  const summary = el('span', 'monarch-run-summary');
  const filter = checkbox('monarch-run-filter', ' failing only');
  const group = checkbox('monarch-run-groupToggle', ' group identical');
  group.label.title =
    'One tile for the ranks whose output is identical so far (as --group folds the text)';
  const stop = el('button', 'monarch-run-stop', 'Stop');
  stop.title =
    'Interrupt the kernel: stops the processes on every rank (as Ctrl-C / the ■ button)';
  const note = el('span', 'monarch-run-note');
  header.append(title, summary, filter.label, group.label, stop, note);
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
  const [filterBox, groupBox] = [filter.box, group.box];
  return {
    root,
    title,
    summary,
    filter: filterBox,
    groupBox,
    stop,
    note,
    grid,
    more,
    stacksPane,
    detail
  };
}

/** The model's fields whose change is drawn (`finished` has a handler of its own). */
const DRAWN = [
  'tiles',
  'summary',
  'selected',
  'groups',
  'grouped',
  'detail',
  'tile_count',
  'limit'
];

/** One view of the grid: its nodes, the lines kept, and its redraws, one per frame. */
class RunView {
  readonly parts: IParts;
  readonly store: LineStore;
  readonly requests: Requests;
  private readonly pane: DetailPane;
  private readonly tiles: TileGrid;
  private frame = 0;
  private refocus = -1; // a tile to give the focus back to after the next redraw
  private generation = 0; // bumped by each change to draw: a tile written since is up to date

  constructor(
    readonly model: IModel,
    root: HTMLElement
  ) {
    this.parts = buildParts(root);
    this.store = new LineStore(model.get('tails') || {});
    this.requests = new Requests(model, this.parts.stacksPane);
    this.pane = new DetailPane(this.parts.detail, model, this.store);
    const tileView: ITileView = {
      model,
      usage: this.requests.usage,
      lastLine: rank => this.store.lastLine(rank),
      askStacks: (label, ranks) => this.requests.askStacks(label, ranks),
      toggle: rank => this.toggle(rank)
    };
    this.tiles = new TileGrid(this.parts.grid, tileView);
  }

  /** Tiles drawn: grows by PAGE with `more`. */
  pageLimit(): number {
    return this.model.get('limit') || PAGE;
  }

  /** A change to draw, in the next frame. */
  readonly schedule = () => {
    this.generation += 1;
    this.keepDrawing();
  };

  /** Draw in the next frame (once, however many ask). */
  keepDrawing(): void {
    if (!this.frame) {
      this.frame = requestAnimationFrame(this.draw);
    }
  }

  /** Stop drawing (the view is gone). */
  cancel(): void {
    if (this.frame) {
      cancelAnimationFrame(this.frame);
    }
  }

  /** Show or hide this rank's output; the focus stays on its tile across the redraw. */
  private toggle(rank: number): void {
    const { model } = this;
    model.set('selected', rank === model.get('selected') ? -1 : rank);
    model.save_changes();
    this.refocus = rank;
    this.schedule();
  }

  /** The groups to draw ([] when not grouping) */
  private shownGroups(): IGroup[] {
    const { model } = this;
    return model.get('grouped') ? model.get('groups') || [] : [];
  }

  readonly draw = () => {
    this.frame = 0;
    const synced: ITile[] = this.model.get('tiles') || [];
    const tiles = synced.filter(t => t && t.label !== undefined);
    this.drawHeader();
    const groups = this.shownGroups();
    const { filter } = this.parts;
    const { shown, total } = shownTiles(
      tiles,
      groups,
      filter.checked,
      this.pageLimit(),
      this.model.get('tile_count') || 0
    );
    this.drawMore(total, shown.length);
    const { grid } = this.parts;
    const focused = grid.contains(document.activeElement)
      ? Number((document.activeElement as HTMLElement).dataset.rank)
      : this.refocus;
    this.refocus = -1;
    const empty = filter.checked ? 'No failing ranks.' : 'No ranks.';
    const now = Date.now() / 1000;
    if (this.tiles.draw(shown, empty, now, focused, this.generation)) {
      this.keepDrawing();
    }
    this.pane.draw(tiles, groups);
  };

  /** The header: title, summary, the toggles' state, Stop enabled while it can stop. */
  private drawHeader(): void {
    const { model } = this;
    const { root, title, summary, filter, stop, groupBox } = this.parts;
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
  }

  /** The "more tiles" button, while the page does not show them all. */
  private drawMore(total: number, shown: number): void {
    const { more } = this.parts;
    more.hidden = total <= shown;
    setText(
      more,
      `${total - shown} more tiles: show ${Math.min(PAGE, total - shown)} more`
    );
  }

  /** A custom message of the kernel: lines, a stacks answer or a resources answer. */
  readonly onMessage = (msg: ILinesMessage & IStacksAnswer & IUsageAnswer) => {
    if (msg && msg.kind === 'stacks') {
      this.requests.showStacks(msg);
      return;
    }
    if (msg && msg.kind === 'usage') {
      this.requests.receiveUsage(msg);
      this.schedule();
      return;
    }
    if (msg && msg.kind === 'lines') {
      this.store.receive(msg);
      this.schedule();
    }
  };
}

/**
 * A view's setting changed by one of its controls: saved, and drawn.
 * @param view
 * @param name  the model's field
 * @param value
 */
function save(view: RunView, name: string, value: unknown): void {
  view.model.set(name, value);
  view.model.save_changes();
  view.schedule();
}

/** Stop: the kernel interrupted (or, for a detached run, told to stop it). */
async function stopRun(view: RunView): Promise<void> {
  const { model } = view;
  const { stop, note } = view.parts;
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
}

/** The header's controls and the "more" button. */
function wireControls(view: RunView): void {
  const { groupBox, more, filter, stop } = view.parts;
  groupBox.addEventListener('change', () =>
    save(view, 'grouped', groupBox.checked)
  );
  more.addEventListener('click', () =>
    save(view, 'limit', view.pageLimit() + PAGE)
  );
  filter.addEventListener('change', () =>
    save(view, 'failing_only', filter.checked)
  );
  stop.addEventListener('click', () => stopRun(view));
}

/**
 * Resources: asked of the kernel only while this view is on screen and the run goes on.
 * Returns the clean-up function.
 */
function pollUsage(view: RunView): () => void {
  let visible = typeof IntersectionObserver === 'undefined';
  const watcher =
    typeof IntersectionObserver === 'undefined'
      ? null
      : new IntersectionObserver(entries => {
          visible = entries.some(entry => entry.isIntersecting);
        });
  watcher?.observe(view.parts.root);
  const poller = setInterval(
    () => view.requests.askUsage(visible),
    USAGE_EVERY
  );
  return () => {
    clearInterval(poller);
    watcher?.disconnect();
  };
}

/**
 * Draw the grid into `root` and follow the model; returns the clean-up function.
 * @param } view
 */
function render({ model, el: root }: { model: IModel; el: HTMLElement }) {
  const view = new RunView(model, root);
  const { schedule } = view;
  wireControls(view);
  const stopPolling = pollUsage(view);
  const onFinished = () => {
    if (model.get('finished')) {
      view.parts.note.textContent = '';
    }
    schedule();
  };
  model.on('msg:custom', view.onMessage);
  DRAWN.forEach(name => model.on(`change:${name}`, schedule));
  model.on('change:finished', onFinished);
  // elapsed times of running ranks tick once a second
  const ticker = setInterval(() => {
    if (!model.get('finished')) {
      schedule();
    }
  }, 1000);
  view.draw();
  if (!model.get('finished') && !model.get('shown')) {
    // the kernel streams the lines until a view says it shows them: then they are the grid's
    model.set('shown', true);
    model.save_changes();
  }
  return () => {
    clearInterval(ticker);
    stopPolling();
    view.cancel();
    model.off('msg:custom', view.onMessage);
    DRAWN.forEach(name => model.off(`change:${name}`, schedule));
    model.off('change:finished', onFinished);
  };
}

export default { render };
