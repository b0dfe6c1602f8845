// @ts-check
// The run grid's `_esm` as saved in a notebook: a loader of a few hundred bytes
// instead of run.js and run.css in every grid's widget state. It imports run.js
// from the monarch_jupyter server extension (same origin, one fetch for all
// grids of the page); without one (VS Code, a server without monarch_jupyter)
// it asks the kernel for the code in a message, which the kernel answers even
// while a cell runs. Custom messages that arrive while it loads are replayed.
// __VERSION__ is replaced by the Python side: a digest of run.js + run.css (cache busting).

const VERSION = '__VERSION__';

/** @returns {string} the server's base URL, or '' outside a Jupyter page */
function baseUrl() {
  const config = document.getElementById('jupyter-config-data');
  if (!config) {
    return '';
  }
  try {
    const page = JSON.parse(config.textContent || '{}');
    return new URL((page.baseUrl || '/').replace(/\/?$/, '/'), location.href)
      .href;
  } catch {
    return '';
  }
}

/** @param {string} id @param {(node: HTMLElement) => void} fill */
function once(id, fill) {
  if (!document.getElementById(id)) {
    const node = document.createElement(id.endsWith('link') ? 'link' : 'style');
    node.id = id;
    fill(node);
    document.head.append(node);
  }
}

async function fromServer() {
  const base = baseUrl();
  if (!base) {
    throw new Error('not in a Jupyter page');
  }
  const root = `${base}monarch-jupyter/static/`;
  const g = /** @type {any} */ (globalThis);
  g.__monarchRunGrid =
    g.__monarchRunGrid || import(`${root}run.js?v=${VERSION}`);
  const mod = await g.__monarchRunGrid;
  once('monarch-run-css-link', node => {
    const link = /** @type {HTMLLinkElement} */ (node);
    link.rel = 'stylesheet';
    link.href = `${root}run.css?v=${VERSION}`;
  });
  return mod.default;
}

/** @param {any} model */
function fromKernel(model) {
  return new Promise(resolve => {
    /** @param {any} msg */
    const onCode = async msg => {
      if (!msg || msg.kind !== 'code') {
        return;
      }
      model.off('msg:custom', onCode);
      once('monarch-run-css-style', node => (node.textContent = msg.css));
      const url = URL.createObjectURL(
        new Blob([msg.esm], { type: 'text/javascript' })
      );
      const mod = await import(url);
      URL.revokeObjectURL(url);
      resolve(mod.default);
    };
    model.on('msg:custom', onCode);
    // with an id, a busy kernel answers at once (busy_comm), and only once
    model.send({ kind: 'code', id: `code-${Date.now()}-${Math.random()}` });
  });
}

/** @param {{ model: any, el: HTMLElement }} view */
async function render({ model, el }) {
  /** @type {any[]} */
  const early = [];
  /** @param {any} msg */
  const keep = msg => early.push(msg);
  model.on('msg:custom', keep);
  el.textContent = 'loading the run grid…';
  let widget;
  try {
    widget = await fromServer();
  } catch {
    widget = await fromKernel(model);
  }
  model.off('msg:custom', keep);
  el.textContent = '';
  // the grid subscribes to custom messages: hand it those that came while loading
  const replaying = new Proxy(model, {
    get(target, key) {
      if (key === 'on') {
        return (/** @type {string} */ event, /** @type {any} */ callback) => {
          target.on(event, callback);
          if (event === 'msg:custom') {
            early.filter(m => m && m.kind !== 'code').forEach(m => callback(m));
          }
        };
      }
      const value = target[key];
      return typeof value === 'function' ? value.bind(target) : value;
    }
  });
  return widget.render({ model: replaying, el });
}

export default { render };
