/**
 * DOM view of a run result: header, "failing only" filter and one collapsible
 * panel per rank.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';

import {
  IRank,
  IRunResult,
  MIME_TYPE,
  badgeKind,
  badgeText,
  formatDuration,
  moreText,
  omittedNotice,
  orderRanks,
  PAGE_RANKS,
  initiallyOpen,
  attachLine,
  parseRunResult,
  progressText,
  runningNote,
  summaryText,
  truncatedNotice
} from './model';
import { el } from './dom';
import { PayloadRenderer } from './payloadRenderer';
import { appendAnsi } from './ansi';
import {
  IOutliers,
  SLICE_CHARS,
  failingGroups,
  findOutliers,
  findOutliersInSlices
} from './outliers';
import {
  DIFF_OPEN,
  renderDiffHead,
  renderMajority,
  renderOutlier
} from './diffView';

const CLASS = 'jp-MonarchRun';

function renderHeader(result: IRunResult): HTMLElement {
  const header = el('div', `${CLASS}-header`);
  // under the cell that ran it, the command is that cell's input: not repeated
  if (!result.own_cell) {
    const command = el('code', `${CLASS}-command`, result.command);
    command.title = result.mode ? `mode: ${result.mode}` : '';
    header.appendChild(command);
  }
  const meta = [
    result.target,
    result.state === 'running'
      ? progressText(result.ranks)
      : summaryText(result.summary),
    formatDuration(result.duration)
  ].filter(Boolean);
  header.appendChild(el('span', `${CLASS}-meta`, meta.join(' · ')));
  if (result.log_path) {
    header.appendChild(el('span', `${CLASS}-log`, `log: ${result.log_path}`));
  }
  return header;
}

/** A rank's header line: its label, status badge and time (a panel's summary, or a row). */
function rankHeader(tag: 'summary' | 'div', rank: IRank): HTMLElement {
  const header = el(tag, `${CLASS}-rankHeader`);
  header.appendChild(el('span', `${CLASS}-label`, rank.label));
  header.appendChild(
    el(
      'span',
      `${CLASS}-badge ${CLASS}-badge-${badgeKind(rank)}`,
      badgeText(rank)
    )
  );
  const duration = formatDuration(rank.duration);
  if (duration) {
    header.appendChild(el('span', `${CLASS}-duration`, duration));
  }
  return header;
}

function renderRank(rank: IRank, rankCount: number): HTMLElement {
  const panel = el('details', `${CLASS}-rank`);
  panel.open = initiallyOpen(rank, rankCount);
  panel.appendChild(rankHeader('summary', rank));

  const notice = truncatedNotice(rank.truncated);
  if (notice) {
    panel.appendChild(el('div', `${CLASS}-truncated`, notice));
  }
  if (rank.error) {
    panel.appendChild(el('div', `${CLASS}-rankError`, rank.error));
  }
  const lines = el('pre', `${CLASS}-lines`);
  panel.appendChild(lines);
  // A closed panel's lines are drawn when it is first opened: the DOM stays
  // proportional to what is on screen.
  const fill = (): void => {
    if (panel.open && !lines.childElementCount) {
      for (const [stream, text] of rank.lines) {
        const line = el('div', `${CLASS}-line ${CLASS}-${stream}`);
        appendAnsi(line, text);
        lines.appendChild(line);
      }
    }
  };
  panel.addEventListener('toggle', fill);
  fill();
  return panel;
}

/** A streamed result's failing ranks, one line each (label, badge, time, error): the header
 * counts the rest. */
function renderStreamedRanks(result: IRunResult): HTMLElement {
  const list = el('div', `${CLASS}-ranks ${CLASS}-streamedRanks`);
  for (const rank of result.ranks.filter(r => badgeKind(r) === 'failed')) {
    const row = rankHeader('div', rank);
    if (rank.error) {
      row.appendChild(el('span', `${CLASS}-rankError`, rank.error));
    }
    list.appendChild(row);
  }
  return list;
}

/** "Still running when saved" and the attach line, selectable to copy. */
function renderRunning(result: IRunResult, note: string): HTMLElement {
  const box = el('div', `${CLASS}-running`);
  box.appendChild(el('div', `${CLASS}-runningNote`, note));
  const line = el('code', `${CLASS}-attach`, attachLine(result));
  line.title = 'Run this in a cell of a notebook in the same folder';
  box.appendChild(line);
  return box;
}

/** A labelled checkbox (Space toggles it; the label names it for screen readers). */
function toggle(
  text: string,
  className: string
): { label: HTMLLabelElement; box: HTMLInputElement } {
  const label = el('label', className);
  const box = el('input', '');
  box.type = 'checkbox';
  label.append(box, text);
  return { label, box };
}

/** What fills the ranks list: one page of panels, and "show more" for the next. */
interface IListViews {
  ranks(failingOnly: boolean): void;
  diff(failingOnly: boolean): void;
  page(): void;
}

/**
 * The two views of the ranks list, paged by PAGE_RANKS: rank panels (failing
 * first), or the outlier groups' diffs from the majority (found once, when
 * first shown).
 */
function listViews(
  result: IRunResult,
  list: HTMLElement,
  more: HTMLButtonElement
): IListViews {
  let items: (() => HTMLElement)[] = [];
  let drawn = 0;
  let noun = 'rank';
  let shows = 0; // which call drew the list last: a late diff draws only if still current
  let found: Promise<IOutliers> | null = null;
  const page = (): void => {
    const end = Math.min(items.length, drawn + PAGE_RANKS);
    for (; drawn < end; drawn++) {
      list.appendChild(items[drawn]());
    }
    more.textContent = moreText(drawn, items.length, noun);
    more.hidden = !more.textContent;
  };
  const start = (next: (() => HTMLElement)[], empty: string): void => {
    items = next;
    drawn = 0;
    if (!items.length && empty) {
      list.appendChild(el('div', `${CLASS}-empty`, empty));
    }
    page();
  };
  const drawDiff = (outliers: IOutliers, failingOnly: boolean): void => {
    const { majority } = outliers;
    list.appendChild(renderDiffHead(outliers.head));
    if (majority && outliers.outliers.length) {
      list.appendChild(renderMajority(majority));
    }
    const shown = failingOnly
      ? failingGroups(outliers.outliers)
      : outliers.outliers;
    start(
      shown.map(
        (group, i) => () => renderOutlier(majority!, group, i < DIFF_OPEN)
      ),
      outliers.outliers.length ? 'No failing outliers.' : ''
    );
  };
  let known: IOutliers | null = null; // found, once
  return {
    ranks: failingOnly => {
      shows++;
      noun = 'rank';
      const shown = orderRanks(result.ranks, failingOnly);
      const count = result.ranks.length;
      start(
        shown.map(rank => () => renderRank(rank, count)),
        'No ranks to show.'
      );
    },
    diff: failingOnly => {
      const current = ++shows;
      noun = 'outlier';
      if (known || textChars(result.ranks) <= SLICE_CHARS) {
        known = known ?? findOutliers(result.ranks);
        drawDiff(known, failingOnly);
        return;
      }
      // many ranks: grouped a slice per task, so the page keeps drawing frames
      list.appendChild(
        el(
          'div',
          `${CLASS}-empty`,
          `Comparing ${result.ranks.length.toLocaleString('en-US')} ranks…`
        )
      );
      more.hidden = true;
      found = found ?? findOutliersInSlices(result.ranks, nextTask);
      void found.then(outliers => {
        known = outliers;
        if (shows === current) {
          list.textContent = '';
          drawDiff(outliers, failingOnly);
        }
      });
    },
    page
  };
}

/** Characters of output over all ranks. */
function textChars(ranks: IRank[]): number {
  let chars = 0;
  for (const rank of ranks) {
    for (const [, text] of rank.lines) {
      chars += text.length;
    }
  }
  return chars;
}

/** Resolves in a later task: the browser may draw a frame in between. */
function nextTask(): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, 0));
}

/** Renders `application/vnd.monarch.remote+json` outputs. */
export class RunResultRenderer extends PayloadRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super(options, CLASS);
  }

  /** Render the model's payload, or a short error for an invalid one. */
  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    let result: IRunResult;
    const data = this.freshPayload(model);
    try {
      result = parseRunResult(data);
    } catch (error) {
      this.node.appendChild(
        el('div', `${CLASS}-error`, `Cannot show run result: ${error}`)
      );
      return Promise.resolve();
    }
    const note = runningNote(result);
    this.toggleClass(`${CLASS}-isRunning`, note !== '');
    if (note) {
      this.node.appendChild(renderRunning(result, note));
    }
    this.node.appendChild(renderHeader(result));
    if (note && !result.ranks.some(rank => rank.lines.length)) {
      return Promise.resolve(); // saved before any output: the note and header say it all
    }
    if (result.streamed) {
      // the lines are the cell's stream output above: each rank once, without them
      this.node.appendChild(renderStreamedRanks(result));
      return Promise.resolve();
    }

    const failingOnly = toggle(' failing only', `${CLASS}-filter`);
    const diff = toggle(' diff to majority', `${CLASS}-diffToggle`);
    diff.label.title =
      "Each outlier rank's output as a diff against the most common output";
    this.node.appendChild(failingOnly.label);
    if (result.ranks.length > 1) {
      this.node.appendChild(diff.label);
    }
    const ranks = el('div', `${CLASS}-ranks`);
    const more = el('button', `${CLASS}-more`);
    more.type = 'button';
    const views = listViews(result, ranks, more);
    const show = (): void => {
      ranks.textContent = '';
      (diff.box.checked ? views.diff : views.ranks)(failingOnly.box.checked);
    };
    failingOnly.box.addEventListener('change', show);
    diff.box.addEventListener('change', show);
    more.addEventListener('click', () => views.page());
    show();
    this.node.appendChild(ranks);
    this.node.appendChild(more);
    const omitted = omittedNotice(result.omitted);
    if (omitted) {
      this.node.appendChild(el('div', `${CLASS}-truncated`, omitted));
    }
    return Promise.resolve();
  }
}

/** Renderer factory for the run-result mimetype. */
export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [MIME_TYPE],
  // Below text/html (50) so the kernel's HTML fallback is not preferred.
  defaultRank: 10,
  createRenderer: options => new RunResultRenderer(options)
};
