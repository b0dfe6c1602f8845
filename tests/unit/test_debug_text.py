"""The cell debugger's pure parts: commands, "stopped at", pdb output shown as cells."""

from __future__ import annotations

from monarch_jupyter.actors import debug_text
from monarch_jupyter.actors.debug_text import Command, Frame, Stop

CELL = "class A:\n    def compute(self):\n        x = 1\n        breakpoint()\n        return x\n"


def locate(frame: Frame):
    if frame.filename == "<dynamic-code>" and frame.name == "compute" and 2 <= frame.lineno <= 5:
        return 7, CELL.splitlines()[frame.lineno - 1]
    return None


def stop(rank: int = 1) -> Stop:
    return Stop("workers", rank, (("hosts", rank),), Frame("<dynamic-code>", 4, "compute", "A.compute"))


def test_stopped_line_names_cell_line_and_function():
    assert debug_text.stopped_line(stop(), locate) == "hosts=1 stopped at cell [7] line 4 in compute()"


def test_stopped_line_outside_a_cell_names_the_file():
    s = Stop("w", 0, (("hosts", 0),), Frame("/x/mod.py", 3, "f"))
    assert debug_text.stopped_line(s, locate) == "hosts=0 stopped at /x/mod.py line 3 in f()"


def test_stop_from_record():
    record = {"actor": "w", "rank": 2, "point": [["hosts", 0], ["gpus", 2]], "frame": ["<d>", 5, "f", "A.f"]}
    assert debug_text.stop_from(record).label == "hosts=0,gpus=2"


def test_a_post_mortem_stop_says_the_error_on_one_line():
    record = {
        "actor": "w",
        "rank": 1,
        "point": [["hosts", 1]],
        "frame": ["<dynamic-code>", 5, "compute", "A.compute"],
        "error": "ValueError: bad\nsecond line " + "x" * 300,
    }
    s = debug_text.stop_from(record)
    assert s.error == "ValueError: bad"
    assert debug_text.stopped_line(s, locate) == (
        "hosts=1 stopped after ValueError: bad at cell [7] line 5 in compute() (post-mortem)"
    )
    long = debug_text.stop_from({**record, "error": "E: " + "y" * 300})
    assert len(long.error) == 120 and long.error.endswith("…")


def test_parse_commands():
    assert debug_text.parse("  ") == Command("empty")
    assert debug_text.parse("attach 1") == Command("attach", "1")
    assert debug_text.parse("continue") == Command("continue")
    assert debug_text.parse("c") == Command("pdb", "c")
    assert debug_text.parse("p x + 1") == Command("pdb", "p x + 1")
    assert debug_text.parse("l") == Command("list")
    assert debug_text.parse("l 3, 9") == Command("list", "3, 9")
    assert debug_text.parse("l foo") == Command("pdb", "l foo")
    assert debug_text.parse("ll") == Command("longlist")
    assert debug_text.parse("ranks") == Command("ranks")
    assert debug_text.parse("a") == Command("pdb", "a")  # pdb's own `args`


def test_pick_by_number_or_label():
    stops = [stop(0), stop(1)]
    assert debug_text.pick("1", stops) == stops[1]
    assert debug_text.pick("hosts=0", stops) == stops[0]
    assert debug_text.pick("5", stops) is None


def test_translate_rewrites_cell_frames_and_adds_the_source():
    text = "> <dynamic-code>(4)compute()\n(Pdb) "
    shown, frame = debug_text.translate(text, locate)
    assert shown == "> cell [7] line 4 in compute()\n-> breakpoint()\n"
    assert frame == Frame("<dynamic-code>", 4, "compute")


def test_translate_keeps_other_frames_and_current_is_the_marked_one():
    text = "  /lib/t.py(9)run()\n-> self.go()\n> <dynamic-code>(5)compute()\n(Pdb) "
    shown, frame = debug_text.translate(text, locate)
    assert shown.splitlines()[:2] == ["  /lib/t.py(9)run()", "-> self.go()"]
    assert "> cell [7] line 5 in compute()" in shown
    assert frame is not None and frame.lineno == 5


def test_cell_listing_around_and_whole():
    frame = Frame("<dynamic-code>", 4, "compute")
    around = debug_text.cell_listing(frame, locate, {7: CELL}.get, whole=False)
    assert around is not None and "   4 ->\t        breakpoint()" in around
    whole = debug_text.cell_listing(frame, locate, {7: CELL}.get, whole=True)
    assert whole is not None and whole.startswith("cell [7]:") and len(whole.splitlines()) == 6
    assert debug_text.cell_listing(Frame("/x.py", 1, "f"), locate, {7: CELL}.get, whole=False) is None


def test_list_span_as_pdb():
    assert debug_text.span("") is None
    assert debug_text.span("7") == (2, 12)
    assert debug_text.span("3, 9") == (3, 9)
    assert debug_text.span("3, 2") == (3, 5)
    assert debug_text.span("x") is None
    frame = Frame("<dynamic-code>", 4, "compute")
    text = debug_text.cell_listing(frame, locate, {7: CELL}.get, whole=False, lines=(2, 3))
    assert text == "   2   \t    def compute(self):\n   3   \t        x = 1"


def test_where_drops_the_dispatch_frames_bt_keeps_them():
    text = (
        "  /usr/lib/python3.11/threading.py(1002)_bootstrap()\n-> self._bootstrap_inner()\n"
        "  /x/site-packages/monarch/_src/actor/actor_mesh.py(900)handle()\n-> r = the_method(self, *args)\n"
        "> <dynamic-code>(4)compute()\n(Pdb) "
    )
    trimmed = debug_text.trim_stack(text)
    assert trimmed.splitlines()[0] == "  (2 frames of Monarch's dispatch: bt shows them)", trimmed
    assert "threading" not in trimmed and "> <dynamic-code>(4)compute()" in trimmed
    assert debug_text.trim_stack("> /x/mine.py(3)f()\n(Pdb) ") == "> /x/mine.py(3)f()\n(Pdb) "
