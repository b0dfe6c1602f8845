// @ts-check
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
// coalesced to one per animation frame. Linted by labextension's eslint and
// prettier, type-checked by tsc (JSDoc) and tested by its jest tests.

/**
 * One rank's tile, as widgets/run_model.py `tile_json` sends it.
 * @typedef {object} Tile
 * @property {number} rank
 * @property {string} label
 * @property {string} status
 * @property {boolean} failing
 * @property {number | null} returncode
 * @property {number | null} duration
 * @property {number | null} started  epoch seconds
 * @property {string | null} error
 * @property {number | null} [quiet_since]  epoch seconds of its last output, while quiet
 */

/**
 * Ranks whose output is identical so far, as widgets/grid_fold.py sends them.
 * @typedef {object} Group
 * @property {string} label  hosts=[0-6,8] (8)
 * @property {number[][]} ranks  tile indices as [first, last] runs
 * @property {number} count
 * @property {number} rank  the first member: its tile stands for the group
 * @property {string} status
 * @property {boolean} failing
 * @property {boolean} quiet
 * @property {boolean} [idle]
 */

/**
 * A rank's resources, as the kernel's usage answer sends them.
 * @typedef {object} Usage
 * @property {number | null} [cpu]  % of one core
 * @property {number | null} [rss]  bytes
 * @property {number | null} [gpu_mib]
 * @property {boolean} [idle]  ~0 % CPU while the others work
 */

/** @typedef {[string, string]} Line  [stream, text] */

/**
 * The part of anywidget's model this view uses.
 * @typedef {object} Model
 * @property {(name: string) => any} get
 * @property {(name: string, value: any) => void} set
 * @property {() => void} save_changes
 * @property {(content: object) => void} send
 * @property {(event: string, callback: (...args: any[]) => void) => void} on
 * @property {(event: string, callback: (...args: any[]) => void) => void} off
 */

const KEEP = 500; // lines kept per rank in the browser
const PAGE = 200; // tiles drawn at most, then a button draws this many more (a bounded DOM)
// Tiles rewritten by one frame at most (beyond those that must show a change at once); the rest
// follow in the next frames. Each tile's new texts are laid out again: 200 of them were 30–48 ms
// of layout a frame on a slow 2-core machine, and a tile 4 frames late is not seen.
export const WRITES_PER_FRAME = 50;
const USAGE_EVERY = 2000; // ms between resources requests while the grid is visible
const STACKS_KEPT = 3; // stacks answers shown at once (the newest first)

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

// SGR colours in remote text, drawn safely (textContent and numbers only): the
// twin of labextension/src/ansi.ts (this module is one file, as anywidget loads
// it); labextension's jest runs both on the same cases. Every other terminal
// control is dropped.
const ANSI_NAMES = [
  'black',
  'red',
  'green',
  'yellow',
  'blue',
  'magenta',
  'cyan',
  'white'
];
/* eslint-disable no-control-regex */
const ANSI_CONTROL =
  /\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]P_^X][\s\S]*?(?:\x07|\x1b\\|\x9c|$)|\x9b[0-?]*[ -/]*[@-~]|[\x9d\x90\x9e\x9f\x98][\s\S]*?(?:\x07|\x1b\\|\x9c|$)|\x1b[ -/]*[0-~]|\x1b|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]/g;
const ANSI_SGR = /^\x1b\[([0-9;:]*)m$/;
/* eslint-enable no-control-regex */

/**
 * @typedef {object} Segment
 * @property {string} text
 * @property {string[]} classes  JupyterLab's ansi-* classes
 * @property {string} color  rgb(...) or ''
 * @property {string} background  rgb(...) or ''
 */

/** @param {number} n */
function ansi256(n) {
  if (n < 8) {
    return ANSI_NAMES[n];
  }
  if (n < 16) {
    return `${ANSI_NAMES[n - 8]}-intense`;
  }
  if (n < 232) {
    const steps = [0, 95, 135, 175, 215, 255];
    const i = n - 16;
    return `rgb(${steps[Math.floor(i / 36)]}, ${steps[Math.floor(i / 6) % 6]}, ${steps[i % 6]})`;
  }
  const grey = 8 + (n - 232) * 10;
  return `rgb(${grey}, ${grey}, ${grey})`;
}

/** @param {number | undefined} value */
function ansiByte(value) {
  return Math.max(0, Math.min(255, Math.floor(value ?? 0)));
}

/**
 * @param {string} params
 * @param {{fg: string, bg: string, bold: boolean, underline: boolean}} style
 */
function applySgr(params, style) {
  const codes = params === '' ? [0] : params.split(/[;:]/).map(Number);
  for (let i = 0; i < codes.length; i++) {
    const code = codes[i];
    if (code === 0 || Number.isNaN(code)) {
      Object.assign(style, { fg: '', bg: '', bold: false, underline: false });
    } else if (code === 1 || code === 22) {
      style.bold = code === 1;
    } else if (code === 4 || code === 24) {
      style.underline = code === 4;
    } else if (code >= 30 && code <= 37) {
      style.fg = ANSI_NAMES[code - 30];
    } else if (code >= 90 && code <= 97) {
      style.fg = `${ANSI_NAMES[code - 90]}-intense`;
    } else if (code >= 40 && code <= 47) {
      style.bg = ANSI_NAMES[code - 40];
    } else if (code >= 100 && code <= 107) {
      style.bg = `${ANSI_NAMES[code - 100]}-intense`;
    } else if (code === 39 || code === 49) {
      style[code === 39 ? 'fg' : 'bg'] = '';
    } else if (code === 38 || code === 48) {
      let value = '';
      if (codes[i + 1] === 5) {
        value = ansi256(ansiByte(codes[i + 2]));
        i += 2;
      } else if (codes[i + 1] === 2) {
        const rgb = codes.slice(i + 2, i + 5);
        value = `rgb(${ansiByte(rgb[0])}, ${ansiByte(rgb[1])}, ${ansiByte(rgb[2])})`;
        i += 4;
      }
      style[code === 38 ? 'fg' : 'bg'] = value;
    }
  }
}

/**
 * `text` as styled segments: SGR applied, every other control dropped.
 * @param {string} text
 * @returns {Segment[]}
 */
export function ansiSegments(text) {
  const style = { fg: '', bg: '', bold: false, underline: false };
  /** @type {Segment[]} */
  const out = [];
  /** @param {string} part */
  const push = part => {
    if (!part) {
      return;
    }
    /** @param {string} v */
    const named = v => v !== '' && !v.startsWith('rgb');
    const classes = [];
    if (named(style.fg)) {
      classes.push(`ansi-${style.fg}-fg`);
    }
    if (named(style.bg)) {
      classes.push(`ansi-${style.bg}-bg`);
    }
    if (style.bold) {
      classes.push('ansi-bold');
    }
    if (style.underline) {
      classes.push('ansi-underline');
    }
    out.push({
      text: part,
      classes,
      color: style.fg.startsWith('rgb') ? style.fg : '',
      background: style.bg.startsWith('rgb') ? style.bg : ''
    });
  };
  const control = new RegExp(ANSI_CONTROL.source, 'g');
  let last = 0;
  let match;
  while ((match = control.exec(text)) !== null) {
    push(text.slice(last, match.index));
    last = match.index + match[0].length;
    const sgr = ANSI_SGR.exec(match[0]);
    if (sgr) {
      applySgr(sgr[1], style);
    }
  }
  push(text.slice(last));
  return out;
}

/**
 * Append `text` to `parent` with its colours: spans with textContent, never HTML.
 * @param {HTMLElement} parent
 * @param {string} text
 */
export function appendAnsi(parent, text) {
  for (const part of ansiSegments(text)) {
    if (!part.classes.length && !part.color && !part.background) {
      parent.append(document.createTextNode(part.text));
      continue;
    }
    const span = document.createElement('span');
    span.className = part.classes.join(' ');
    span.style.color = part.color;
    span.style.backgroundColor = part.background;
    span.textContent = part.text;
    parent.append(span);
  }
}

/**
 * `text` without any terminal control (a tile's one-line preview).
 * @param {string} text
 */
export function plainText(text) {
  return ansiSegments(text)
    .map(part => part.text)
    .join('');
}

/**
 * "4.2s", "2m 05s"; empty for an unknown time.
 * @param {number | null | undefined} seconds
 */
export function formatSeconds(seconds) {
  if (seconds === null || seconds === undefined || seconds < 0) {
    return '';
  }
  if (seconds < 60) {
    return `${seconds.toFixed(1)}s`;
  }
  const whole = Math.round(seconds);
  return `${Math.floor(whole / 60)}m ${String(whole % 60).padStart(2, '0')}s`;
}

/**
 * [[0, 2], [5, 5]] -> [0, 1, 2, 5]
 * @param {number[][]} runs
 */
export function expandRuns(runs) {
  /** @type {number[]} */
  const out = [];
  for (const [first, last] of runs) {
    for (let i = first; i <= last; i++) {
      out.push(i);
    }
  }
  return out;
}

/**
 * "310 MB", "1.2 GB" (decimal units, as remote/resources.py writes them).
 * @param {number | null | undefined} bytes
 */
export function formatBytes(bytes) {
  if (bytes === null || bytes === undefined || bytes < 0) {
    return '';
  }
  let value = bytes;
  for (const unit of ['B', 'KB', 'MB', 'GB']) {
    if (value < 1000 || unit === 'GB') {
      return unit === 'B' || unit === 'KB' || value >= 100
        ? `${Math.round(value)} ${unit}`
        : `${value.toFixed(1)} ${unit}`;
    }
    value /= 1000;
  }
  return '';
}

/**
 * "cpu 98% · 1.2 GB · gpu 900 MiB"; '' without a sample.
 * @param {Usage | undefined} usage
 */
export function usageText(usage) {
  if (!usage || usage.cpu === null || usage.cpu === undefined) {
    return '';
  }
  let text = `cpu ${Math.round(usage.cpu)}% · ${formatBytes(usage.rss)}`;
  if (usage.gpu_mib !== null && usage.gpu_mib !== undefined) {
    text += ` · gpu ${usage.gpu_mib} MiB`;
  }
  return text;
}

/**
 * "failed · rc 3", "running", "timed out".
 * @param {Tile} tile
 */
export function statusText(tile) {
  const status = tile.status.replace('_', ' ');
  if (
    tile.returncode !== null &&
    tile.returncode !== undefined &&
    tile.status !== 'running'
  ) {
    return `${status} · rc ${tile.returncode}`;
  }
  return status;
}

// Interrupt this kernel through the server's REST API: the same request as the
// toolbar's interrupt button. The kernel thread is busy running the cell, so a
// widget message would only be read after the run.
/** @param {string} kernelId */
async function interruptKernel(kernelId) {
  const config = document.getElementById('jupyter-config-data');
  const page = config ? JSON.parse(config.textContent || '{}') : {};
  const base = (page.baseUrl || '/').replace(/\/?$/, '/');
  /** @type {Record<string, string>} */
  const headers = {};
  if (page.token) {
    headers.Authorization = `token ${page.token}`;
  }
  const xsrf = document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/);
  if (xsrf) {
    headers['X-XSRFToken'] = decodeURIComponent(xsrf[1]);
  }
  const response = await fetch(
    `${base}api/kernels/${encodeURIComponent(kernelId)}/interrupt`,
    {
      method: 'POST',
      headers,
      credentials: 'same-origin'
    }
  );
  if (!response.ok) {
    throw new Error(`interrupt failed: HTTP ${response.status}`);
  }
}

/**
 * Draw the grid into `root` and follow the model; returns the clean-up function.
 * @param {{ model: Model, el: HTMLElement }} view
 */
function render({ model, el: root }) {
  /** @type {Map<number, Line[]>} */
  const buffers = new Map(); // rank -> [[stream, text], ...]
  /** @type {Map<number, number>} */
  const dropped = new Map(); // rank -> lines not received
  /** @type {Map<number, number>} */
  const received = new Map(); // rank -> lines appended in all (the detail pane appends the new)
  /** @type {Map<number, number>} */
  const resets = new Map(); // rank -> times its kept lines were replaced (the pane is redrawn)
  /** @type {Record<string, Line[]>} */
  const tails = model.get('tails') || {};
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
  /** @type {Map<number, Usage>} */
  const usage = new Map(); // tile index -> its latest resources sample
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

  /** @param {number} rank */
  function lastLine(rank) {
    const lines = buffers.get(rank);
    return lines && lines.length ? lines[lines.length - 1][1] : '';
  }

  /**
   * Ask the kernel for these tiles' stacks; the answer lands in the stacks pane.
   * @param {string} label
   * @param {number[]} ranks
   */
  function askStacks(label, ranks) {
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

  /** @param {{id?: string, text?: string, error?: string}} msg */
  function showStacks(msg) {
    const box = Array.from(stacksPane.children).find(
      node => /** @type {HTMLElement} */ (node).dataset.id === msg.id
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
   * @typedef {object} Drawn
   * @property {HTMLDivElement} node
   * @property {HTMLElement} label
   * @property {HTMLElement} status
   * @property {HTMLElement} elapsed
   * @property {HTMLElement} last
   * @property {HTMLElement | null} usage
   * @property {HTMLElement | null} stacks  its Stacks button (when the hosts can dump stacks)
   * @property {Tile} tile  what the node shows now (its handlers read it when used)
   * @property {Group | undefined} group
   * @property {number} written  the generation it was last written in (-1: never)
   */
  /** @type {Map<number, Drawn>} */
  let drawn = new Map(); // tile rank -> its node, for the tiles on the page

  /**
   * Set a node's text only when it differs: an unchanged assignment still costs a relayout.
   * A node holding one text node keeps it and changes its data: replacing it (textContent)
   * inserts a node, and JupyterLab's `:has()` rules on the output area then restyle the cell.
   * @param {HTMLElement} node
   * @param {string} text
   */
  function setText(node, text) {
    const only = node.firstChild;
    if (only && only === node.lastChild && only.nodeType === Node.TEXT_NODE) {
      const textNode = /** @type {Text} */ (only);
      if (textNode.data !== text) {
        textNode.data = text;
      }
    } else if (node.textContent !== text) {
      node.textContent = text;
    }
  }

  /**
   * @param {HTMLElement} node
   * @param {string} name
   * @param {string} value
   */
  function setAttr(node, name, value) {
    if (node.getAttribute(name) !== value) {
      node.setAttribute(name, value);
    }
  }

  /** @param {Drawn} entry  the ranks a tile stands for, as its handlers need them */
  function members(entry) {
    return entry.group ? expandRuns(entry.group.ranks) : [entry.tile.rank];
  }

  /** @param {Drawn} entry */
  function labelOf(entry) {
    return entry.group ? entry.group.label : entry.tile.label;
  }

  /** @returns {Drawn} a tile's node with its handlers, filled by updateTile */
  function createTile() {
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
    /** @type {Drawn} */
    const entry = {
      node,
      label,
      status,
      elapsed,
      last,
      usage: null,
      stacks: null,
      tile: /** @type {any} */ (null),
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
   * @param {Drawn} entry
   * @param {Tile} tile
   * @param {number} now  epoch seconds
   * @param {Group} [group]
   */
  function updateTile(entry, tile, now, group) {
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
   * @typedef {object} Pane
   * @property {number} rank
   * @property {number} reset  resets.get(rank) when drawn
   * @property {number} total  received.get(rank) when drawn
   * @property {HTMLElement} head
   * @property {HTMLElement | null} dropped
   * @property {HTMLElement} pre
   */
  /** @type {Pane | null} */
  let pane = null;
  /** @param {Tile[]} tiles */
  function drawDetail(tiles) {
    const rank = model.get('selected');
    /** @type {Tile | null} */
    const aside = model.get('detail');
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
   * @param {Pane} shown
   * @param {string} headText
   * @param {number} lost
   * @param {number} total
   */
  function updatePane(shown, headText, lost, total) {
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
   * @param {HTMLElement} pre
   * @param {Line[]} lines
   */
  function appendLines(pre, lines) {
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

  function draw() {
    frame = 0;
    /** @type {Tile[]} */
    const synced = model.get('tiles') || [];
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
    /** @type {[Tile, Group | undefined][]} */
    let shown = [];
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
      ? Number(/** @type {HTMLElement} */ (document.activeElement).dataset.rank)
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
      /** @type {Map<number, Drawn>} */
      const next = new Map(); // the tiles no longer shown let go of their nodes
      /** @type {[Tile, Group | undefined, Drawn][]} */
      const placed = []; // the shown tiles that have a node this frame, in order
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
        /** @type {Element} */ (grid.lastElementChild).remove();
      }
      const target = drawn.get(focused);
      if (target && document.activeElement !== target.node) {
        target.node.focus({ preventScroll: true });
      }
    }
    drawDetail(tiles);
  }

  /** @returns {Group[]} the groups to draw ([] when not grouping) */
  function shownGroups() {
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
  /** @param {{kind?: string, lines?: Record<string, Line[]>, dropped?: Record<string, number>}} msg */
  const onLines = msg => {
    if (msg && msg.kind === 'stacks') {
      showStacks(/** @type {any} */ (msg));
      return;
    }
    if (msg && msg.kind === 'usage') {
      onUsage(/** @type {any} */ (msg));
      return;
    }
    if (!msg || msg.kind !== 'lines') {
      return;
    }
    /** @type {Record<string, Line[]>} */
    const tailsNow = /** @type {any} */ (msg).tails || {};
    /** @type {Record<string, number>} */
    const earlier = /** @type {any} */ (msg).earlier || {};
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
  /** @param {{id?: string, ranks?: Record<string, Usage>}} msg */
  const onUsage = msg => {
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
