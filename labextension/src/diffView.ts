/**
 * DOM of the renderer's "Diff to majority" view: the `--diff` head line, the
 * majority's output (closed) and one collapsible panel per outlier group,
 * whose diff is computed and drawn when it is first opened.
 */
import { el } from './dom';
import { appendAnsi } from './ansi';
import { OPEN_ALL_MAX } from './model';
import { IGroup, groupBadge, lineKind, outlierDiff } from './outliers';

const CLASS = 'jp-MonarchRun';

/** Outlier panels open at first (the others draw their diff when opened). */
export const DIFF_OPEN = OPEN_ALL_MAX;

/** The head lines: `--diff: hosts=[0-6] (7) agree; 1 outlier` and its notes. */
export function renderDiffHead(head: string[]): HTMLElement {
  const box = el('div', `${CLASS}-diffHead`);
  for (const line of head) {
    box.appendChild(el('div', '', line));
  }
  return box;
}

/** A `<details>` whose body is made by `fill` when first opened. */
function panel(
  group: IGroup,
  title: string,
  open: boolean,
  fill: (body: HTMLElement) => void
): HTMLElement {
  const details = el('details', `${CLASS}-rank ${CLASS}-outlier`);
  details.open = open;
  const summary = el('summary', `${CLASS}-rankHeader`);
  summary.appendChild(el('span', `${CLASS}-label`, title));
  const badge = groupBadge(group);
  summary.appendChild(
    el('span', `${CLASS}-badge ${CLASS}-badge-${badge.kind}`, badge.text)
  );
  details.appendChild(summary);
  const body = el('pre', `${CLASS}-lines ${CLASS}-diff`);
  body.tabIndex = 0; // a scrolling region is reachable from the keyboard
  body.setAttribute('aria-label', title);
  details.appendChild(body);
  const draw = (): void => {
    if (details.open && !body.childElementCount) {
      fill(body);
    }
  };
  details.addEventListener('toggle', draw);
  draw();
  return details;
}

/** The majority's own output, closed: what every diff is taken against. */
export function renderMajority(group: IGroup): HTMLElement {
  return panel(group, `majority: ${group.label}`, false, body => {
    for (const text of group.output) {
      const line = el('div', `${CLASS}-line`);
      appendAnsi(line, text);
      body.appendChild(line);
    }
    if (!group.output.length) {
      body.appendChild(el('div', `${CLASS}-line`, '(no output)'));
    }
  });
}

/** One outlier group's diff from the majority, drawn when opened. */
export function renderOutlier(
  majority: IGroup,
  group: IGroup,
  open: boolean
): HTMLElement {
  return panel(group, group.label, open, body => {
    outlierDiff(majority, group).forEach((text, index) => {
      const kind = lineKind(text, index);
      const line = el('div', `${CLASS}-line ${CLASS}-diff-${kind}`);
      appendAnsi(line, text);
      body.appendChild(line);
    });
  });
}
