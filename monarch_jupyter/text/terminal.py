"""Remote text made safe to write to a terminal: SGR colours kept, every other control dropped.

A rank's output can carry escapes that act on the terminal that prints it, not just colour
it: OSC 0/2 (window title), OSC 52 (write the clipboard), OSC 8 (links that hide their
target), CSI 2J (clear the screen), cursor moves that overwrite earlier lines, DCS/APC
strings. :func:`terminal_text` keeps only ``ESC [ <digits;:> m`` (colours and bold) and the
whitespace controls ``\\t \\n \\r``. It is stateless, so text split anywhere is still safe:
an unterminated string sequence is dropped to the end of its chunk.
"""

from __future__ import annotations

import html as _html
import re

# One match per control: CSI, a string sequence (OSC/DCS/APC/PM/SOS, up to BEL or ST or the
# end), any other ESC sequence, a lone ESC, or a C0/C1 control that is not \t \n \r.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI ... final byte
    r"|[\x1b][\]P_^X].*?(?:\x07|\x1b\\|\x9c|\Z)"  # string sequences
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    r"|[\x9d\x90\x9e\x9f\x98].*?(?:\x07|\x1b\\|\x9c|\Z)"  # 8-bit string sequences
    r"|\x1b[ -/]*[0-~]"  # other escapes (charset, keypad, reset...)
    r"|\x1b"  # a lone ESC at the end of a chunk
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]",
    re.DOTALL,
)
_SGR = re.compile(r"\x1b\[[0-9;:]*m")


def terminal_text(text: str, colour: bool = True) -> str:
    """``text`` with every terminal control removed but SGR colours (those too when not ``colour``)."""

    def keep(match: re.Match[str]) -> str:
        sequence = match.group(0)
        return sequence if colour and _SGR.fullmatch(sequence) else ""

    return _CONTROL.sub(keep, text)


# JupyterLab's mid-tone palette: fixed colours in exported HTML, legible on light and dark pages
_HTML_COLOURS = ("#3e424d", "#e75c58", "#00a250", "#ddb62b", "#208ffb", "#d160c4", "#60c6c8", "#c5c1b4")


def html_text(text: str) -> str:
    """``text`` as escaped HTML for a <pre>: SGR foreground colours and bold become styled
    spans (for exports and front ends that show the text/html copy), every other control goes."""
    out: list[str] = []
    colour: str | None = None
    bold = False
    at = 0
    clean = terminal_text(text)
    for match in _SGR.finditer(clean + "\x1b[m"):  # a last reset flushes the tail
        part = clean[at : match.start()]
        if part:
            style = (f"color:{colour};" if colour else "") + ("font-weight:bold;" if bold else "")
            out.append(f'<span style="{style}">{_html.escape(part)}</span>' if style else _html.escape(part))
        colour, bold = _sgr(match.group()[2:-1], colour, bold)
        at = match.end()
    return "".join(out)


def _sgr(params: str, colour: str | None, bold: bool) -> tuple[str | None, bool]:
    """The foreground colour and boldness after one SGR sequence's parameters."""
    for word in params.replace(":", ";").split(";") if params else ["0"]:
        code = int(word) if word.isdigit() else -1
        if code in (38, 48):  # 256-colour or RGB: its numbers are not codes; left as is
            break
        if code == 0:
            colour, bold = None, False
        elif code == 1:
            bold = True
        elif code == 22:
            bold = False
        elif code == 39:
            colour = None
        elif 30 <= code <= 37 or 90 <= code <= 97:
            colour = _HTML_COLOURS[code % 10]
    return colour, bold
