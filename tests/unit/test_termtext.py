"""termtext.terminal_text: colours kept, every other terminal control dropped."""

from __future__ import annotations

import pytest

from monarch_jupyter.text.terminal import terminal_text


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("\x1b[31mred\x1b[0m plain", "\x1b[31mred\x1b[0m plain"),
        ("\x1b[1;38;5;196mbold\x1b[m", "\x1b[1;38;5;196mbold\x1b[m"),
        ("\x1b[38:2:1:2:3mtrue\x1b[39m", "\x1b[38:2:1:2:3mtrue\x1b[39m"),
        ("a\x1b]0;pwned title\x07b", "ab"),  # OSC 0: window title
        ("a\x1b]52;c;cm0gLXJmIH4=\x1b\\b", "ab"),  # OSC 52: the clipboard
        ("\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\", "click"),  # OSC 8: a hidden link
        ("before\x1b[2J\x1b[Hafter", "beforeafter"),  # clear the screen, cursor home
        ("x\x1b[1Ay\x1b[2K", "xy"),  # cursor up, erase line
        ("\x1bP+q544e\x1b\\d", "d"),  # DCS
        ("\x1b_apc\x1b\\e", "e"),  # APC
        ("\x1bcreset", "reset"),  # RIS: full reset
        ("\x1b(0graphics", "graphics"),  # charset switch
        ("\x9b2J\x9d0;t\x07z", "z"),  # 8-bit CSI and OSC
        ("bell\x07 bs\x08 nul\x00 del\x7f", "bell bs nul del"),
        ("tab\tcr\rnl\n", "tab\tcr\rnl\n"),
        ("cut \x1b]52;c;AAAA", "cut "),  # unterminated: dropped to the end of the chunk
        ("end\x1b", "end"),
        ("naïve ünïcode ✓", "naïve ünïcode ✓"),
    ],
)
def test_terminal_text(raw: str, safe: str) -> None:
    assert terminal_text(raw) == safe


def test_without_colour_drops_sgr_too() -> None:
    assert terminal_text("\x1b[31mred\x1b[0m \x1b]0;t\x07", colour=False) == "red "
