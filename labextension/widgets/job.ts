// Front end of monarch_jupyter.widgets.job.JobWidget (anywidget ES module).
//
// Everything shown is plain synced state: `head` and `details` (HTML made and
// escaped by the kernel side, widgets/job.py), `actions` (one button each;
// `confirm` asks first, `href` opens a link, otherwise the kernel is sent
// {kind: "action", id}), `message`, and `topology` (services/topology.py
// `to_data`). The topology is sampled by the kernel only while a view is on
// screen: this view says so with {kind: "watch", view, on}.

import { el } from '../src/dom';

/** One button of the widget, as widgets/job.py sends it. */
export interface IAction {
  id: string;
  label: string;
  /** '' | 'danger' | 'accept' */
  style?: string;
  /** a question asked before the action runs */
  confirm?: string;
  /** a link opened instead of a kernel message */
  href?: string;
  disabled?: boolean;
  /** why it is disabled (its tooltip) */
  why?: string;
}

// JupyterLab's button classes: the look follows the theme (job.css for front ends without them).
const KINDS = { danger: 'jp-mod-warn', accept: 'jp-mod-accept' };

function button(action: IAction, onClick: () => void) {
  const node = el('button', `monarch-job-${action.id}`, action.label);
  const kind = KINDS[(action.style || '') as keyof typeof KINDS];
  node.classList.add('jp-mod-styled', kind || 'jp-mod-reject');
  node.type = 'button';
  node.disabled = Boolean(action.disabled);
  if (action.disabled && action.why) {
    node.title = action.why;
  }
  node.addEventListener('click', onClick);
  return node;
}

function actorRow(actor: any) {
  const row = el('tr', 'monarch-topo-actor');
  row.dataset.actor = actor.name;
  row.dataset.stuck = actor.stuck ? 'true' : 'false';
  const cells = [
    actor.name + (actor.stuck ? ' ⚠ stuck' : ''),
    actor.status + (actor.busy ? ` · busy ${actor.busy}` : ''),
    String(actor.messages),
    String(actor.queue)
  ];
  const names = ['name', 'status', 'messages', 'queue'];
  cells.forEach((text, i) => {
    row.append(el('td', `monarch-topo-${names[i]}`, text));
  });
  return row;
}

function topologyView(data: any): HTMLElement {
  const box = el('div', 'monarch-topology');
  box.dataset.stuck = String(data.stuck || 0);
  box.append(el('div', 'monarch-topology-summary', data.summary || ''));
  for (const host of data.hosts || []) {
    const hostNode = el('details', 'monarch-topo-host');
    hostNode.open = true;
    hostNode.append(el('summary', '', `host ${host.name} · mem ${host.mem}`));
    for (const proc of host.procs || []) {
      const procNode = el('div', 'monarch-topo-proc');
      procNode.dataset.proc = proc.name;
      procNode.append(
        el(
          'div',
          '',
          `proc ${proc.name} · mem ${proc.mem} · queue ${proc.queue}`
        )
      );
      if ((proc.actors || []).length) {
        const table = el('table', 'monarch-topo-actors');
        const header = el('tr');
        for (const name of ['actor', 'status', 'processed', 'queue']) {
          header.append(el('th', '', name));
        }
        table.append(header);
        proc.actors.forEach((actor: any) => table.append(actorRow(actor)));
        procNode.append(table);
      }
      hostNode.append(procNode);
    }
    box.append(hostNode);
  }
  return box;
}

/** How long ago, in whole units (text/timefmt.age) */
export function age(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) {
    return `${s} s`;
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)} min`;
  }
  if (s < 86400) {
    return `${Math.floor(s / 3600)} h`;
  }
  return `${Math.floor(s / 86400)} d`;
}

/** Times the kernel wrote as <time data-monarch-since=epoch>local time</time>: "· N ago", live. */
function showAges(box: HTMLElement): void {
  for (const node of box.querySelectorAll('time[data-monarch-since]')) {
    const since = Number(node.getAttribute('data-monarch-since'));
    let tail = node.nextElementSibling;
    if (!tail || !tail.classList.contains('monarch-job-ago')) {
      tail = el('span', 'monarch-job-ago');
      node.after(tail);
    }
    tail.textContent = ` · ${age(Date.now() / 1000 - since)} ago`;
  }
}

/** The widget's nodes. */
interface IJobParts {
  box: HTMLElement;
  head: HTMLElement;
  details: HTMLElement;
  buttons: HTMLElement;
  confirmRow: HTMLElement;
  message: HTMLElement;
  topo: HTMLElement;
}

function buildParts(root: HTMLElement): IJobParts {
  const parts = {
    box: el('div', 'monarch-job-widget'),
    head: el('div', 'monarch-job-head'),
    details: el('div', 'monarch-job-details'),
    buttons: el('div', 'monarch-job-actions'),
    confirmRow: el('div', 'monarch-job-confirm-row'),
    message: el('div', 'monarch-job-message'),
    topo: el('div', 'monarch-job-topology')
  };
  const { box, head, details, buttons, confirmRow, message, topo } = parts;
  box.append(head, details, buttons, confirmRow, message, topo);
  root.append(box);
  return parts;
}

/** The buttons, and the confirmation row of the one that asks first. */
class Actions {
  private asking: string | null = null; // the action whose confirmation is shown

  constructor(
    private readonly model: any,
    private readonly parts: IJobParts
  ) {}

  readonly draw = () => {
    const { buttons, confirmRow } = this.parts;
    buttons.textContent = '';
    confirmRow.textContent = '';
    const actions: IAction[] = this.model.get('actions') || [];
    const pending = actions.find(a => a.id === this.asking && !a.disabled);
    if (!pending) {
      this.asking = null;
    }
    for (const action of actions) {
      if (action.id !== this.asking) {
        buttons.append(button(action, () => this.press(action)));
      }
    }
    if (pending) {
      this.drawConfirm(pending);
    }
  };

  private press(action: IAction): void {
    if (action.confirm) {
      this.asking = action.id;
      this.draw();
    } else {
      this.run(action);
    }
  }

  private drawConfirm(pending: IAction): void {
    const { confirmRow } = this.parts;
    confirmRow.append(el('span', '', pending.confirm || ''));
    confirmRow.append(
      button(
        {
          ...pending,
          id: 'confirm',
          label: `Confirm ${pending.label.toLowerCase()}`
        },
        () => {
          this.asking = null;
          this.draw();
          this.run(pending);
        }
      )
    );
    confirmRow.append(
      button({ id: 'cancel', label: 'Cancel' }, () => {
        this.asking = null;
        this.draw();
      })
    );
  }

  private run(action: IAction): void {
    if (action.href) {
      window.open(action.href, '_blank', 'noopener');
    } else {
      this.model.send({ kind: 'action', id: action.id });
    }
  }
}

/** The synced HTML, the message and the topology. */
function drawState(model: any, parts: IJobParts): void {
  const { head, details, message, topo } = parts;
  head.innerHTML = model.get('head');
  details.innerHTML = model.get('details');
  const text = model.get('message') || '';
  message.textContent = text;
  message.dataset.error = String(Boolean(model.get('message_error')));
  showAges(parts.box);
  const data = model.get('topology') || {};
  topo.textContent = '';
  if (data.hosts || data.error) {
    topo.append(topologyView(data));
  }
}

/**
 * Tell the kernel while this view is on screen ({kind: "watch", view, on}): it samples the
 * topology only then. Returns the clean-up function.
 */
function watchTopology(model: any, box: HTMLElement): () => void {
  const viewId = Math.random().toString(36).slice(2);
  let watching = false;
  const watch = (on: boolean) => {
    if (on !== watching && model.get('topology_available')) {
      watching = on;
      model.send({ kind: 'watch', view: viewId, on });
    }
  };
  let onScreen = false;
  const decide = () =>
    watch(onScreen && document.visibilityState === 'visible');
  const observer =
    typeof IntersectionObserver === 'function'
      ? new IntersectionObserver(entries => {
          onScreen = entries.some(entry => entry.isIntersecting);
          decide();
        })
      : null;
  if (observer) {
    observer.observe(box);
  } else {
    onScreen = true;
  }
  document.addEventListener('visibilitychange', decide);
  // renew "on screen" (the kernel forgets a view it has not heard of in 10 minutes: a closed tab)
  const renew = setInterval(() => {
    if (watching) {
      model.send({ kind: 'watch', view: viewId, on: true });
    }
  }, 30_000);
  model.on('change:topology_available', decide);
  decide();
  return () => {
    clearInterval(renew);
    observer?.disconnect();
    document.removeEventListener('visibilitychange', decide);
    watch(false);
  };
}

function render({ model, el: root }: { model: any; el: HTMLElement }) {
  const parts = buildParts(root);
  const ticker = setInterval(() => showAges(parts.box), 5000);
  const actions = new Actions(model, parts);
  const draw = () => drawState(model, parts);
  for (const name of [
    'head',
    'details',
    'message',
    'message_error',
    'topology'
  ]) {
    model.on(`change:${name}`, draw);
  }
  model.on('change:actions', actions.draw);
  draw();
  actions.draw();
  const stopWatching = watchTopology(model, parts.box);
  return () => {
    clearInterval(ticker);
    stopWatching();
  };
}

export default { render };
