"""text.terminal.html_text: the HTML copy of remote text."""

from __future__ import annotations


def test_html_text_colours_with_styles_and_escapes_the_rest() -> None:
    from monarch_jupyter.text.terminal import html_text

    got = html_text("\x1b[32mgreen\x1b[0m <b>&\n\x1b[1;31mbad\x1b[m\x1b]0;title\x07 \x1b[38;5;32mx")
    assert got == (
        '<span style="color:#00a250;">green</span> &lt;b&gt;&amp;\n'
        '<span style="color:#e75c58;font-weight:bold;">bad</span> x'
    ), got
    assert "\x1b" not in html_text("\x1b[2J\x1b[31m")
