/**
 * SGR colours in remote text, drawn safely: text goes in as textContent only,
 * colours as JupyterLab's `ansi-*` classes or an `rgb()` built from numbers.
 * Every other terminal control (OSC titles, clipboard writes, links, cursor
 * moves) is dropped, as monarch_jupyter/termtext.py does for terminals.
 * The run grid (widgets/run.ts) draws its lines with this module too: esbuild
 * bundles it into monarch_jupyter/widgets/run.js.
 */

/** One run of text with one style. */
export interface ISegment {
  text: string;
  /** JupyterLab classes: ansi-red-fg, ansi-red-intense-bg, ansi-bold, ansi-underline. */
  classes: string[];
  /** rgb(r, g, b) for 256-colour and true-colour foregrounds, else ''. */
  color: string;
  background: string;
}

const NAMES = [
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
const CONTROL =
  /\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]P_^X][\s\S]*?(?:\x07|\x1b\\|\x9c|$)|\x9b[0-?]*[ -/]*[@-~]|[\x9d\x90\x9e\x9f\x98][\s\S]*?(?:\x07|\x1b\\|\x9c|$)|\x1b[ -/]*[0-~]|\x1b|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]/;

const SGR = /^\x1b\[([0-9;:]*)m$/;
/* eslint-enable no-control-regex */

interface IStyle {
  fg: string;
  bg: string;
  bold: boolean;
  underline: boolean;
}

/** A 256-colour index as a class token ('red', 'red-intense') or rgb(). */
function colour256(n: number): string {
  if (n < 8) {
    return NAMES[n];
  }
  if (n < 16) {
    return `${NAMES[n - 8]}-intense`;
  }
  if (n < 232) {
    const steps = [0, 95, 135, 175, 215, 255];
    const i = n - 16;
    return `rgb(${steps[Math.floor(i / 36)]}, ${steps[Math.floor(i / 6) % 6]}, ${steps[i % 6]})`;
  }
  const grey = 8 + (n - 232) * 10;
  return `rgb(${grey}, ${grey}, ${grey})`;
}

function byte(value: number | undefined): number {
  return Math.max(0, Math.min(255, Math.floor(value ?? 0)));
}

/** Apply one SGR parameter list to `style`. */
function applySgr(params: string, style: IStyle): void {
  const codes = params === '' ? [0] : params.split(/[;:]/).map(Number);
  for (let i = 0; i < codes.length; i++) {
    const code = codes[i];
    if (code === 0 || Number.isNaN(code)) {
      Object.assign(style, { fg: '', bg: '', bold: false, underline: false });
    } else if (code === 1) {
      style.bold = true;
    } else if (code === 22) {
      style.bold = false;
    } else if (code === 4) {
      style.underline = true;
    } else if (code === 24) {
      style.underline = false;
    } else if (code >= 30 && code <= 37) {
      style.fg = NAMES[code - 30];
    } else if (code >= 90 && code <= 97) {
      style.fg = `${NAMES[code - 90]}-intense`;
    } else if (code >= 40 && code <= 47) {
      style.bg = NAMES[code - 40];
    } else if (code >= 100 && code <= 107) {
      style.bg = `${NAMES[code - 100]}-intense`;
    } else if (code === 39) {
      style.fg = '';
    } else if (code === 49) {
      style.bg = '';
    } else if (code === 38 || code === 48) {
      let value = '';
      if (codes[i + 1] === 5) {
        value = colour256(byte(codes[i + 2]));
        i += 2;
      } else if (codes[i + 1] === 2) {
        // 38;2;r;g;b, or 38:2:colourspace:r:g:b
        const rgb = codes.slice(i + 2, i + 5);
        value = `rgb(${byte(rgb[0])}, ${byte(rgb[1])}, ${byte(rgb[2])})`;
        i += 4;
      }
      if (code === 38) {
        style.fg = value;
      } else {
        style.bg = value;
      }
    }
  }
}

function segment(text: string, style: IStyle): ISegment {
  const classes: string[] = [];
  const named = (value: string): boolean =>
    value !== '' && !value.startsWith('rgb');
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
  return {
    text,
    classes,
    color: style.fg.startsWith('rgb') ? style.fg : '',
    background: style.bg.startsWith('rgb') ? style.bg : ''
  };
}

/** `text` as styled segments: SGR applied, every other control dropped. */
export function ansiSegments(text: string): ISegment[] {
  const style: IStyle = { fg: '', bg: '', bold: false, underline: false };
  const out: ISegment[] = [];
  let last = 0;
  const push = (part: string): void => {
    if (part) {
      out.push(segment(part, style));
    }
  };
  const control = new RegExp(CONTROL.source, 'g');
  let match: RegExpExecArray | null;
  while ((match = control.exec(text)) !== null) {
    push(text.slice(last, match.index));
    last = match.index + match[0].length;
    const sgr = SGR.exec(match[0]);
    if (sgr) {
      applySgr(sgr[1], style);
    }
  }
  push(text.slice(last));
  return out;
}

/** Append `text` to `parent` with its colours: spans with textContent, never HTML. */
export function appendAnsi(parent: HTMLElement, text: string): void {
  for (const part of ansiSegments(text)) {
    if (!part.classes.length && !part.color && !part.background) {
      parent.appendChild(document.createTextNode(part.text));
      continue;
    }
    const span = document.createElement('span');
    span.className = part.classes.join(' ');
    span.style.color = part.color;
    span.style.backgroundColor = part.background;
    span.textContent = part.text;
    parent.appendChild(span);
  }
}
