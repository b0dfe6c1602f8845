"""Actor errors from every rank: the pure parts (records → text, frames → cells), no kernel."""

from __future__ import annotations

from monarch_jupyter.actors import cells, worker
from monarch_jupyter.actors.failures import (
    DYNAMIC,
    CallFailure,
    Frame,
    Raised,
    RankFailure,
    from_record,
    headline,
    render,
    strip_ansi,
)
from monarch_jupyter.actors.output import RETIRE_AFTER, Log, Router
from monarch_jupyter.text.rank_sets import rank_set

MONARCH = "/venv/lib/python3.11/site-packages/monarch/_src/actor/actor_mesh.py"


def hosts(*values: int) -> list[tuple[tuple[str, int], ...]]:
    return [(("hosts", v),) for v in values]


def test_rank_set_is_ranges_along_the_last_dimension():
    assert rank_set(hosts(0, 2, 3, 4, 5, 6, 7)) == "hosts=0,2-7"
    assert rank_set(hosts(1)) == "hosts=1"
    assert rank_set(hosts(3, 1, 2)) == "hosts=1-3"
    two = [(("hosts", h), ("gpus", g)) for h, g in [(0, 0), (0, 1), (0, 2), (1, 1), (1, 3)]]
    assert rank_set(two) == "hosts=0,gpus=0-2; hosts=1,gpus=1,3"
    assert rank_set([()]) == "the only rank"


def failing(value: int, kind: str, message: str, line: int = 8) -> RankFailure:
    frames = (
        Frame(MONARCH, 1822, "handle_sync", "_Actor.handle_sync", "result = the_method(*args, **kwargs)"),
        Frame(DYNAMIC, line, "boom", "A.boom"),
    )
    return RankFailure((("hosts", value),), (Raised(kind, message, frames),))


def nowhere(frame: Frame) -> tuple[int, str] | None:
    return None


def test_identical_tracebacks_are_grouped_under_their_ranks():
    ranks = [failing(v, "ValueError", "bad") for v in (0, 2, 3, 4, 5, 6, 7)] + [failing(1, "KeyError", "'k'")]
    failure = CallFailure("a", "boom", sorted(ranks, key=lambda r: r.point), size=8)
    text = render(failure, lambda f: (5, "raise ValueError('bad')"))
    first = text.splitlines()[0]
    assert first == "a.boom() failed on 8 of 8 ranks (hosts=0-7): ValueError, KeyError"
    assert "── ranks hosts=0,2-7 (7): ValueError: bad" in text
    assert "── rank hosts=1: KeyError: 'k'" in text
    assert text.count("Traceback (most recent call last):") == 2  # one per group
    assert "cell [5] line 8, in A.boom\n    raise ValueError('bad')" in text


def test_monarch_frames_ansi_and_dynamic_code_are_not_shown():
    ranks = [failing(0, "ValueError", "\x1b[31mred\x1b[39m")]
    text = render(CallFailure("a", "boom", ranks, size=2), lambda f: (3, "x = 1 // 0"))
    assert "handle_sync" not in text and MONARCH not in text
    assert "\x1b" not in text and "ValueError: red" in text
    assert DYNAMIC not in text
    assert headline(CallFailure("a", "boom", ranks, size=2)).startswith(
        "a.boom() failed on 1 of 2 ranks (hosts=0)"
    )
    # a frame whose cell cannot be found still says where it is, without the placeholder name
    assert "notebook code (cell not found), line 8, in A.boom" in render(
        CallFailure("a", "boom", ranks), nowhere
    )


def test_called_from_lines_follow_the_headline():
    text = render(
        CallFailure("a", "boom", [failing(0, "E", "m")], 1), nowhere, ["  called from cell [6] line 1: x"]
    )
    assert text.splitlines()[1] == "  called from cell [6] line 1: x"


def test_strip_ansi():
    assert strip_ansi("\x1b[38;5;28;01mraise\x1b[39;00m e") == "raise e"


CELL = """import time

def helper(r):
    return 1 // r

class A:
    def boom(self, x):
        def inner():
            return helper(x)
        return inner()
"""


def test_frames_of_pickled_code_are_found_in_the_newest_defining_cell():
    older = (3, CELL)
    newer = (7, "\n" + CELL)  # redefined one line lower
    assert cells.find([older], Frame(DYNAMIC, 4, "helper", "helper")) == (3, "    return 1 // r")
    assert cells.find([older], Frame(DYNAMIC, 10, "boom", "A.boom")) == (3, "        return inner()")
    assert cells.find([older], Frame(DYNAMIC, 9, "inner", "A.boom.<locals>.inner")) == (
        3,
        "            return helper(x)",
    )
    assert cells.find([older, newer], Frame(DYNAMIC, 11, "boom", "A.boom")) == (7, "        return inner()")
    assert cells.find([older], Frame(DYNAMIC, 2, "boom", "A.boom")) is None  # outside the function
    assert cells.find([older], Frame(DYNAMIC, 4, "helper", "B.helper")) is None
    assert cells.find([(1, "%%bash\nnot python(")], Frame(DYNAMIC, 1, "f", "f")) is None


def _raise_chain() -> BaseException:
    try:
        try:
            {}["k"]
        except KeyError as e:
            raise ValueError("wrapped") from e
    except ValueError as e:
        return e
    raise AssertionError


def test_a_worker_record_round_trips_with_its_chain():
    class Point(dict):
        def size(self, name: str) -> int:
            return {"hosts": 4, "gpus": 2}[name]

    record = worker.record("a", "boom", Point(hosts=1, gpus=0), _raise_chain())
    failure = from_record(record)
    assert record["size"] == 8 and failure.point == (("hosts", 1), ("gpus", 0))
    assert [r.type for r in failure.chain] == ["KeyError", "ValueError"]
    assert failure.chain[0].relation == "cause" and failure.chain[1].relation == ""
    assert failure.last.frames[-1].qualname == "_raise_chain"
    assert failure.last.frames[-1].filename == __file__
    text = render(CallFailure("a", "boom", [failure], 8), nowhere)
    assert "The above exception was the direct cause of the following exception:" in text
    assert text.index("KeyError: 'k'") < text.rindex("ValueError: wrapped")
    assert 'raise ValueError("wrapped") from e' in text
    assert all(isinstance(f, tuple) for f in record["chain"][0]["frames"])


# ── output: chunks → the cell running when they were produced ──
def chunk(pid: int, host: int, text: str, at: float, stream: str = "out") -> dict:
    return {
        "kind": "output",
        "pid": pid,
        "point": [("hosts", host)],
        "stream": stream,
        "text": text,
        "time": at,
    }


def cell(n: int) -> dict:
    return {"msg_id": f"cell-{n}"}


def routed(writes: list) -> dict[str, str]:
    out: dict[str, str] = {}
    for parent, text in writes:
        out[parent["msg_id"]] = out.get(parent["msg_id"], "") + text
    return out


def test_output_goes_to_the_cell_running_when_it_was_produced():
    router = Router()
    router.cell(100.0, cell(1))
    router.add(chunk(11, 0, "one\n", 100.5), now=1.0)
    writes = router.flush(now=1.0)
    router.cell(101.0, cell(2))
    # produced during cell 1, arriving after cell 2 started: still cell 1's
    router.add(chunk(12, 1, "late\n", 100.9, "err"), now=1.1)
    router.add(chunk(11, 0, "two\n", 101.2), now=1.2)
    writes += router.flush(now=1.3)
    got = routed(writes)
    assert got["cell-1"] == "[hosts=0] one\n[hosts=1:err] late\n"
    assert got["cell-2"] == "[hosts=0] two\n"


def test_partial_lines_and_carriage_returns_are_shown_as_a_terminal_would():
    router = Router()
    router.cell(100.0, cell(1))
    router.add(chunk(11, 0, "10%\r50%\r", 100.1), now=1.0)
    assert routed(router.flush(now=1.0)) == {}  # an unfinished line waits a little
    got = routed(router.flush(now=1.5))
    assert got == {"cell-1": "[hosts=0] 50%\n"}
    router.add(chunk(11, 0, "100%\n", 100.2), now=1.6)
    assert routed(router.flush(now=2.0)) == {"cell-1": "[hosts=0] 100%\n"}


def test_writes_are_coalesced_and_a_left_cell_is_retired():
    router = Router()
    router.cell(100.0, cell(1))
    writes = []
    for i in range(500):  # 500 lines within 0.5 s from 8 ranks appearing one by one: ≤ ~12 writes
        router.add(chunk(11 + i % 8, i % 8, f"line {i}\n", 100.0 + i / 1000), now=1.0 + i / 1000)
        writes += router.flush(now=1.0 + i / 1000)
    router.cell(101.0, cell(2))
    writes += router.flush(now=1.6)
    writes += router.flush(now=1.6 + RETIRE_AFTER + 0.1)  # cell 1, quiet, gets what is left
    assert len(writes) <= 3 + 16 * 0.5 + 1 + 1, len(writes)  # burst, 0.5 s at the rate, one more, the tails
    text = routed(writes)["cell-1"]
    assert [line.split()[-1] for line in text.splitlines()] == [str(i) for i in range(500)]
    for line in text.splitlines():  # none mislabelled
        assert line.startswith(f"[hosts={int(line.split()[-1]) % 8}] "), line
    assert not router.busy(1.6 + RETIRE_AFTER + 0.2)


def test_the_worker_module_runs_from_its_source_alone():
    """Procs run worker.py's source (a worker may have no monarch_jupyter, or another version)."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(worker))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and not (node.module or "").startswith("monarch_jupyter"), ast.dump(node)
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("monarch_jupyter") for a in node.names)
    call = worker.bootstrap("a sink", False)
    assert call.func is exec and call.args[0].endswith("\ninstall(SINK, OUTPUT, SPAWN, KERNEL)\n")
    names = {"__name__": "somewhere_else"}
    exec(call.args[0].rsplit("\ninstall(", 1)[0], names)
    assert names["record"]("a", "m", {}, ValueError("x"))["chain"][0]["type"] == "ValueError"


def test_install_never_fails_the_procs_start(capsys, monkeypatch):
    def broken(sink: object, output: bool, spawn: int = 0) -> None:
        raise AttributeError("_Actor has no _report_exception")

    monkeypatch.setattr(worker, "_install", broken)
    worker.install("a sink", True)
    assert "actor errors/output are not forwarded" in capsys.readouterr().err


def test_a_forced_flush_at_the_cells_end_writes_what_the_rate_held_back():
    router = Router()
    router.cell(100.0, cell(1))
    writes = []
    for i in range(6):  # six lines at one instant: the burst (3 writes) then held back
        router.add(chunk(11, 0, f"l{i}\n", 100.1), now=1.0)
        writes += router.flush(now=1.0)
    assert len(writes) == 3 and "l5" not in routed(writes)["cell-1"]
    writes += router.flush(now=1.0, force=True)
    assert routed(writes)["cell-1"].endswith("[hosts=0] l5\n")


def test_the_log_has_every_complete_line_labelled(tmp_path):
    log = Log(str(tmp_path / "actors.log"))
    log.add(chunk(11, 0, "one\ntw", 1.0))
    log.add(chunk(12, 1, "oops\n", 1.0, "err"))
    log.add(chunk(11, 0, "o\n", 1.0))
    log.flush()
    assert (tmp_path / "actors.log").read_text() == "[hosts=0] one\n[hosts=1:err] oops\n[hosts=0] two\n"


def test_lines_a_cell_cannot_show_point_to_the_log():
    router = Router(log_path=".monarch/default/actors/x.log")
    router.cell(100.0, cell(1))
    router.add(chunk(11, 0, "".join(f"{i}\n" for i in range(1500)), 100.1), now=1.0)
    text = routed(router.flush(now=1.0))["cell-1"]
    assert "(full log: .monarch/default/actors/x.log)" in text


def test_a_sliced_calls_rank_is_labelled_by_its_procs_whole_point():
    proc = [("hosts", 1), ("gpus", 0)]
    assert worker.proc_point([("gpus", 0)], proc) == proc  # w.slice(hosts=1): gpus only
    assert worker.proc_point([("hosts", 1), ("gpus", 0)], proc) == proc
    assert worker.proc_point([("hosts", 0)], []) == [("hosts", 0)]  # before install: the call's own


def test_meshes_of_one_shape_are_named_in_labels():
    from monarch_jupyter.actors.output import rank_label
    from monarch_jupyter.system.actor_procs import shared_shapes

    def proc(spawn: int, mesh: str, *point: tuple[str, int]) -> dict:
        return {"spawn": spawn, "mesh": mesh, "point": list(point)}

    procs = [
        proc(1, "anon#1", ("gpus", 0)),
        proc(1, "anon#1", ("gpus", 1)),
        proc(2, "anon#2", ("gpus", 0)),
        proc(3, "trainers", ("hosts", 0), ("gpus", 0)),
    ]
    assert shared_shapes(procs) == {1: "anon#1", 2: "anon#2"}
    assert shared_shapes(procs[:2] + procs[3:]) == {}
    assert shared_shapes([*procs[:2], {**procs[2], "output": False}]) == {}  # live_output(False)
    assert rank_label({"point": [("gpus", 0)], "mesh": "anon#2"}) == "anon#2 gpus=0"
    assert rank_label({"point": [("gpus", 0)]}) == "gpus=0"
