/**
 * @jest-environment jsdom
 *
 * SGR colours in remote text (src/ansi.ts): the renderer's, and the run grid's
 * (widgets/run.ts bundles the same module into monarch_jupyter/widgets/run.js).
 */
import * as lab from '../ansi';
import * as grid from '../../widgets/run';

const twins = [['renderer', lab.ansiSegments, lab.appendAnsi]] as const;

it('is the one module in the renderer and the run grid', () => {
  expect(grid.ansiSegments).toBe(lab.ansiSegments);
  expect(grid.appendAnsi).toBe(lab.appendAnsi);
});

describe.each(twins)('%s ansiSegments', (_name, segments, append) => {
  it('keeps plain text as is', () => {
    expect(segments('plain <b>text</b>')).toEqual([
      { text: 'plain <b>text</b>', classes: [], color: '', background: '' }
    ]);
  });

  it('maps the 16 colours, bold and underline to JupyterLab classes', () => {
    const out = segments(
      '\x1b[31mred\x1b[0m \x1b[1;92;44mboth\x1b[22;4mu\x1b[m.'
    );
    expect(out.map(s => [s.text, s.classes])).toEqual([
      ['red', ['ansi-red-fg']],
      [' ', []],
      ['both', ['ansi-green-intense-fg', 'ansi-blue-bg', 'ansi-bold']],
      ['u', ['ansi-green-intense-fg', 'ansi-blue-bg', 'ansi-underline']],
      ['.', []]
    ]);
  });

  it('draws 256 and true colours as rgb() from clamped numbers', () => {
    const out = segments('\x1b[38;5;196ma\x1b[38;2;999;0;7mb\x1b[48;5;240mc');
    expect(out[0].color).toBe('rgb(255, 0, 0)');
    expect(out[1].color).toBe('rgb(255, 0, 7)');
    expect(out[2].background).toBe('rgb(88, 88, 88)');
  });

  it('drops every other terminal control', () => {
    const text = segments(
      'a\x1b]0;title\x07b\x1b]52;c;AAAA\x1b\\c\x1b[2J\x1b[Hd\x1b]8;;http://x\x1b\\e\x1b]8;;\x1b\\\x07\x08f\x1b]0;cut'
    )
      .map(s => s.text)
      .join('');
    expect(text).toBe('abcdef');
  });

  it('appends text nodes and spans, never HTML', () => {
    const div = document.createElement('div');
    append(
      div,
      '\x1b[31m<img src=x onerror=alert(1)>\x1b[0m<script>x</script>'
    );
    expect(div.querySelector('img')).toBeNull();
    expect(div.querySelector('script')).toBeNull();
    expect(div.querySelector('span.ansi-red-fg')!.textContent).toBe(
      '<img src=x onerror=alert(1)>'
    );
    expect(div.textContent).toBe(
      '<img src=x onerror=alert(1)><script>x</script>'
    );
  });
});
