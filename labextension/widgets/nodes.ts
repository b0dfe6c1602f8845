/**
 * The grid's text nodes, written only when they change (a write costs a relayout of a live
 * grid). Here, not in src/dom.ts: the sidebar's modules import dom.ts at application start.
 */
import { el } from '../src/dom';

/**
 * Set a node's text only when it differs: an unchanged assignment still costs a relayout.
 * A node holding one text node keeps it and changes its data: replacing it (textContent)
 * inserts a node, and JupyterLab's `:has()` rules on the output area then restyle the cell.
 */
export function setText(node: HTMLElement, text: string): void {
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
 * A line shown only while it has text: `node` (or, the first time, a new
 * `<div class=className>` put in by `place`) given `text`, or removed for ''.
 * Returns the node that now shows it, null when none does.
 */
export function optionalLine(
  node: HTMLElement | null,
  text: string,
  className: string,
  place: (made: HTMLElement) => void
): HTMLElement | null {
  if (!text) {
    node?.remove();
    return null;
  }
  const shown = node || el('div', className);
  if (!node) {
    place(shown);
  }
  setText(shown, text);
  return shown;
}
