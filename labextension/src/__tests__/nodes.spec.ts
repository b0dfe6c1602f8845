/**
 * @jest-environment jsdom
 *
 * The grid's text-node helpers (widgets/nodes.ts): an optional line is made once, kept in
 * place while its text changes, and removed when its text is empty.
 */
import { optionalLine, setText } from '../../widgets/nodes';

describe('optionalLine', () => {
  it('makes, updates in place and removes its line', () => {
    const parent = document.createElement('div');
    const place = (made: HTMLElement) => parent.append(made);
    expect(optionalLine(null, '', 'x-line', place)).toBeNull();
    expect(parent.childElementCount).toBe(0);
    const first = optionalLine(null, '3 earlier lines', 'x-line', place);
    expect(first?.className).toBe('x-line');
    expect(parent.textContent).toBe('3 earlier lines');
    const again = optionalLine(first, '5 earlier lines', 'x-line', place);
    expect(again).toBe(first);
    expect(parent.childElementCount).toBe(1);
    expect(parent.textContent).toBe('5 earlier lines');
    expect(optionalLine(again, '', 'x-line', place)).toBeNull();
    expect(parent.childElementCount).toBe(0);
  });
});

describe('setText', () => {
  it('keeps the one text node and changes its data', () => {
    const node = document.createElement('span');
    setText(node, 'a');
    const text = node.firstChild;
    setText(node, 'b');
    expect(node.firstChild).toBe(text);
    expect(node.textContent).toBe('b');
  });
});
