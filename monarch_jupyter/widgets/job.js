// @ts-check
// Front end of monarch_jupyter.widgets.job.JobWidget (anywidget ES module).
//
// Everything shown is plain synced state: `head` and `details` (HTML made and
// escaped by the kernel side, widgets/job.py), `actions` (one button each;
// `confirm` asks first, `href` opens a link, otherwise the kernel is sent
// {kind: "action", id}), `message`, and `topology` (services/topology.py
// `to_data`). The topology is sampled by the kernel only while a view is on
// screen: this view says so with {kind: "watch", view, on}.

/**
 * @typedef {object} Action
 * @property {string} id
 * @property {string} label
 * @property {string} [style]    '' | 'danger'
 * @property {string} [confirm]  a question asked before the action runs
 * @property {string} [href]     a link opened instead of a kernel message
 * @property {boolean} [disabled]
 */

/**
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {string} [className]
 * @param {string} [text]
 * @returns {HTMLElementTagNameMap[K]}
 */
function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

const BUTTON =
  'border:1px solid #d0d7de;border-radius:4px;padding:2px 10px;margin:4px 6px 0 0;cursor:pointer;background:#f6f8fa;color:#24292f';
const DANGER = 'background:#cf222e;color:#fff;border-color:#cf222e';

/** @param {Action} action @param {() => void} onClick */
function button(action, onClick) {
  const node = el('button', `monarch-job-${action.id}`, action.label);
  node.setAttribute(
    'style',
    BUTTON + (action.style === 'danger' ? `;${DANGER}` : '')
  );
  node.disabled = Boolean(action.disabled);
  node.addEventListener('click', onClick);
  return node;
}

/** @param {any} actor */
function actorRow(actor) {
  const row = el('tr', 'monarch-topo-actor');
  row.dataset.actor = actor.name;
  row.dataset.stuck = actor.stuck ? 'true' : 'false';
  if (actor.stuck) {
    row.setAttribute(
      'style',
      'background:#ffebe9;color:#cf222e;font-weight:bold'
    );
  }
  const cells = [
    actor.name + (actor.stuck ? ' ⚠ stuck' : ''),
    actor.status + (actor.busy ? ` · busy ${actor.busy}` : ''),
    String(actor.messages),
    String(actor.queue)
  ];
  const names = ['name', 'status', 'messages', 'queue'];
  cells.forEach((text, i) => {
    const cell = el('td', `monarch-topo-${names[i]}`, text);
    cell.setAttribute(
      'style',
      `padding:0 8px;${i > 1 ? 'text-align:right' : ''}`
    );
    row.append(cell);
  });
  return row;
}

/** @param {any} data @returns {HTMLElement} */
function topologyView(data) {
  const box = el('div', 'monarch-topology');
  box.dataset.stuck = String(data.stuck || 0);
  const head = el('div', 'monarch-topology-summary', data.summary || '');
  head.setAttribute(
    'style',
    `margin-top:6px;${data.stuck ? 'color:#cf222e;font-weight:bold' : ''}`
  );
  box.append(head);
  for (const host of data.hosts || []) {
    const hostNode = el('details', 'monarch-topo-host');
    hostNode.open = true;
    hostNode.append(el('summary', '', `host ${host.name} · mem ${host.mem}`));
    for (const proc of host.procs || []) {
      const procNode = el('div', 'monarch-topo-proc');
      procNode.dataset.proc = proc.name;
      procNode.setAttribute('style', 'margin-left:16px');
      procNode.append(
        el(
          'div',
          '',
          `proc ${proc.name} · mem ${proc.mem} · queue ${proc.queue}`
        )
      );
      if ((proc.actors || []).length) {
        const table = el('table', 'monarch-topo-actors');
        table.setAttribute(
          'style',
          'margin-left:16px;border-collapse:collapse'
        );
        const header = el('tr');
        for (const name of ['actor', 'status', 'processed', 'queue']) {
          header.append(el('th', '', name));
        }
        table.append(header);
        proc.actors.forEach((/** @type {any} */ actor) =>
          table.append(actorRow(actor))
        );
        procNode.append(table);
      }
      hostNode.append(procNode);
    }
    box.append(hostNode);
  }
  return box;
}

/** @param {{ model: any, el: HTMLElement }} view */
function render({ model, el: root }) {
  const viewId = Math.random().toString(36).slice(2);
  const box = el('div', 'monarch-job-widget');
  const head = el('div', 'monarch-job-head');
  const details = el('div', 'monarch-job-details');
  const buttons = el('div', 'monarch-job-actions');
  const confirmRow = el('div', 'monarch-job-confirm-row');
  const message = el('div', 'monarch-job-message');
  const topo = el('div', 'monarch-job-topology');
  box.append(head, details, buttons, confirmRow, message, topo);
  root.append(box);
  /** @type {string | null} */
  let asking = null;

  /** @param {Action} action */
  const run = action => {
    if (action.href) {
      window.open(action.href, '_blank', 'noopener');
    } else {
      model.send({ kind: 'action', id: action.id });
    }
  };

  const drawActions = () => {
    buttons.textContent = '';
    confirmRow.textContent = '';
    /** @type {Action[]} */
    const actions = model.get('actions') || [];
    const pending = actions.find(a => a.id === asking && !a.disabled);
    if (!pending) {
      asking = null;
    }
    for (const action of actions) {
      if (action.id === asking) {
        continue;
      }
      buttons.append(
        button(action, () => {
          if (action.confirm) {
            asking = action.id;
            drawActions();
          } else {
            run(action);
          }
        })
      );
    }
    if (pending) {
      confirmRow.append(el('span', '', pending.confirm || ''));
      confirmRow.append(
        button(
          {
            ...pending,
            id: 'confirm',
            label: `Confirm ${pending.label.toLowerCase()}`
          },
          () => {
            asking = null;
            drawActions();
            run(pending);
          }
        )
      );
      confirmRow.append(
        button({ id: 'cancel', label: 'Cancel' }, () => {
          asking = null;
          drawActions();
        })
      );
    }
  };

  const draw = () => {
    head.innerHTML = model.get('head');
    details.innerHTML = model.get('details');
    const text = model.get('message') || '';
    message.textContent = text;
    message.setAttribute(
      'style',
      `color:${model.get('message_error') ? '#cf222e' : '#6e7781'}`
    );
    const data = model.get('topology') || {};
    topo.textContent = '';
    if (data.hosts || data.error) {
      topo.append(topologyView(data));
    }
  };

  let watching = false;
  /** @param {boolean} on */
  const watch = on => {
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

  for (const name of [
    'head',
    'details',
    'message',
    'message_error',
    'topology'
  ]) {
    model.on(`change:${name}`, draw);
  }
  model.on('change:actions', drawActions);
  model.on('change:topology_available', decide);
  draw();
  drawActions();
  decide();
  return () => {
    clearInterval(renew);
    observer?.disconnect();
    document.removeEventListener('visibilitychange', decide);
    watch(false);
  };
}

export default { render };
