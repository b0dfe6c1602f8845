"""The widgets' custom messages against ``schema/widget-messages.schema.json``.

The kinds are read from the code both ways: what the Python handlers read and the kernel
sends (an AST of ``monarch_jupyter/widgets/*.py``), and what the front ends send and read (a
regex over ``labextension/widgets/*.ts`` and the loader ``run_stub.js``). A kind added on one
side only, or to the schema only, fails here. Then the messages the kernel side makes, and
the requests as the front ends send them, are validated against the schema.
"""

from __future__ import annotations

import ast
import json
import re
import time
from pathlib import Path

import pytest

from monarch_jupyter.remote.view import model
from monarch_jupyter.schema import WIDGET_MESSAGES_PATH
from monarch_jupyter.widgets.run_model import Batch

jsonschema = pytest.importorskip("jsonschema")

REPO = Path(__file__).resolve().parents[2]
WIDGETS_PY = REPO / "monarch_jupyter" / "widgets"
WIDGETS_TS = REPO / "labextension" / "widgets"
RUN_STUB = WIDGETS_PY / "run_stub.js"


def schema() -> dict:
    data = json.loads(WIDGET_MESSAGES_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(data)
    return data


def validator(direction: str | None = None) -> jsonschema.Draft202012Validator:
    """The whole schema, or one direction of it (``toKernel`` / ``toFrontEnd``)."""
    data = schema()
    if direction is not None:
        data = {**data, "anyOf": [{"$ref": f"#/$defs/{direction}"}]}
    return jsonschema.Draft202012Validator(data)


def schema_kinds(direction: str) -> set[tuple[str, str]]:
    """(widget, kind) of each message of ``direction``."""
    defs = schema()["$defs"]
    out = set()
    for ref in defs[direction]["oneOf"]:
        entry = defs[ref["$ref"].rsplit("/", 1)[1]]
        out.add((entry["x-widget"], entry["properties"]["kind"]["const"]))
    return out


# ── the kinds, as the Python side reads and sends them ──
def _widget_of(path: Path) -> str:
    return "job" if path.stem == "job" else "run"


def _compared_kinds(func: ast.AST, constants: dict[str, tuple[str, ...]]) -> set[str]:
    """String constants compared with ``==`` (or ``in`` a module tuple) in ``func``."""
    kinds: set[str] = set()
    for node in ast.walk(func):
        if not isinstance(node, ast.Compare):
            continue
        for op, right in zip(node.ops, node.comparators, strict=True):
            for side in (node.left, right):
                if isinstance(op, ast.Eq) and isinstance(side, ast.Constant) and isinstance(side.value, str):
                    kinds.add(side.value)
            if isinstance(op, ast.In) and isinstance(right, ast.Name) and right.id in constants:
                kinds.update(constants[right.id])
    return kinds


def _module_tuples(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple):
            values = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
            if values and all(isinstance(v, str) for v in values):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        out[target.id] = tuple(values)
    return out


def python_handled() -> set[tuple[str, str]]:
    """The kinds each widget's ``_on_front_end_msg`` (and what it calls on self) reads."""
    out = set()
    for path in sorted(WIDGETS_PY.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = _module_tuples(tree)
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
            handler = methods.get("_on_front_end_msg")
            if handler is None:
                continue
            called = {
                n.func.attr
                for n in ast.walk(handler)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in methods
            }
            for name in {"_on_front_end_msg", *called}:
                out |= {(_widget_of(path), kind) for kind in _compared_kinds(methods[name], constants)}
    return out


def python_sent() -> set[tuple[str, str]]:
    """The kinds of the dict literals the kernel side sends: ``{"kind": "lines", …}``, and
    ``{"kind": kind, …}`` where ``kind`` is a request's (answered with its own kind)."""
    out = set()
    for path in sorted(WIDGETS_PY.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = _module_tuples(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Dict):
                continue
            for key, value in zip(node.keys, node.values, strict=True):
                if not (isinstance(key, ast.Constant) and key.value == "kind"):
                    continue
                if isinstance(value, ast.Constant):
                    out.add((_widget_of(path), value.value))
                else:  # an answer: the kinds of the requests it answers (REQUESTS)
                    out |= {(_widget_of(path), kind) for kind in constants.get("REQUESTS", ())}
    return out


# ── the kinds, as the front ends send and read them ──
SEND = re.compile(r"\bsend\(\s*\{\s*kind:\s*'([a-z]+)'")
READ = re.compile(r"\bkind\s*[!=]==\s*'([a-z]+)'")


def front_end_sources() -> list[tuple[str, str]]:
    """(widget, text) of every front-end source: the TypeScript modules and the loader."""
    files = [*sorted(WIDGETS_TS.glob("*.ts")), RUN_STUB]
    assert len(files) > 5, files  # the sources are where this test looks for them
    return [(_widget_of(path), path.read_text(encoding="utf-8")) for path in files]


def ts_sent() -> set[tuple[str, str]]:
    return {(widget, kind) for widget, text in front_end_sources() for kind in SEND.findall(text)}


def ts_read() -> set[tuple[str, str]]:
    return {(widget, kind) for widget, text in front_end_sources() for kind in READ.findall(text)}


def test_the_schema_names_exactly_the_kinds_the_front_ends_send_and_the_kernel_reads():
    expected = schema_kinds("toKernel")
    assert ts_sent() == expected, "labextension/widgets/*.ts and run_stub.js send"
    assert python_handled() == expected, "monarch_jupyter/widgets/*.py read"


def test_the_schema_names_exactly_the_kinds_the_kernel_sends_and_the_front_ends_read():
    expected = schema_kinds("toFrontEnd")
    assert python_sent() == expected, "monarch_jupyter/widgets/*.py send"
    assert ts_read() == expected, "labextension/widgets/*.ts and run_stub.js read"


def test_the_kind_readers_see_a_kind_added_on_one_side_only():
    """The readers above are not blind: a new kind in a source is found (so the equalities
    above fail when a kind is added without the schema)."""
    assert SEND.findall("model.send({ kind: 'pause', id })") == ["pause"]
    assert READ.findall("if (msg && msg.kind === 'pause') {") == ["pause"]
    source = 'def _on_front_end_msg(self, w, content, b):\n    if content.get("kind") == "pause": pass\n'
    func = ast.parse(source).body[0]
    assert _compared_kinds(func, {}) == {"pause"}
    assert ("job", "watch") in python_handled() and ("run", "stop") in python_handled()
    assert ("run", "lines") in python_sent() and ("run", "code") in python_sent()


# ── the messages themselves ──
def assert_valid(message: dict, direction: str) -> None:
    errors = sorted(validator(direction).iter_errors(message), key=str)
    assert not errors, f"{message!r}: {[e.message for e in errors]}"


def test_the_requests_as_the_front_ends_send_them_are_valid_and_others_are_not():
    requests = [
        {"kind": "stacks", "id": "stacks-1-1700000000000", "ranks": [0, 1, 2]},
        {"kind": "usage", "id": "usage-2-1700000000000"},
        {"kind": "stop"},
        {"kind": "code", "id": "code-1700000000000-0.25"},
        {"kind": "code"},  # a loader saved before requests had ids
        {"kind": "action", "id": "kill"},
        {"kind": "watch", "view": "k3j2h1", "on": True},
    ]
    for request in requests:
        assert_valid(request, "toKernel")
    wrong = [
        {"kind": "pause"},  # no such kind
        {"kind": "stacks", "id": "s", "ranks": ["0"]},  # ranks are tile indices
        {"kind": "usage"},  # no id
        {"kind": "watch", "view": "v", "on": True, "extra": 1},  # no property it does not name
        {"kind": "lines", "lines": {}, "dropped": {}},  # the kernel's, not a front end's
    ]
    for request in wrong:
        assert list(validator("toKernel").iter_errors(request)), request


@pytest.fixture
def run_widget():
    pytest.importorskip("anywidget")
    from monarch_jupyter.widgets.run import RunWidget
    from test_widgets import Clock, run_state

    def stacks(run_id, ranks):
        return "hosts=1:\n    pid 1: sleep 30\n"

    def usage(run_id):
        return [
            {"key": "hosts", "rank": 0, "cpu": 99.0, "rss": 2e8, "gpu_mib": None, "idle": False},
            {"key": "hosts", "rank": 1, "cpu": 0.0, "rss": 1e8, "gpu_mib": 512.0, "idle": True},
        ]

    clock = Clock(10.0)
    state = run_state(2, clock)
    state.run_id = "20260101-000000-abcd"
    widget = RunWidget(state, title="%%remote", clock=clock, stacks=stacks, usage=usage, bounded=False)
    state.observers.append(widget)
    sent: list[dict] = []
    widget.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]
    try:
        yield widget, state, clock, sent
    finally:
        widget.close()


def test_the_run_grids_messages_are_valid(run_widget):
    widget, state, clock, sent = run_widget
    state.apply(model.Started(0))
    state.apply(model.Started(1))
    for step in range(5):
        clock.t += 0.1
        state.apply(model.Output(0, model.OUT, f"line {step}\n"))
        state.apply(model.Output(1, model.ERR, f"\x1b[31mwarn {step}\x1b[0m\n"))
    clock.t += 0.1
    widget.on_tick(state)
    widget._serve({"kind": "stacks", "id": "stacks-1-1", "ranks": [1]})
    widget._serve({"kind": "stacks", "id": "stacks-2-1", "ranks": [9]})  # an error answer
    widget._serve({"kind": "usage", "id": "usage-3-1"})
    widget._serve({"kind": "usage", "id": "usage-4-1"})  # within a second: skipped
    widget._serve({"kind": "code", "id": "code-5-1"})
    widget._on_front_end_msg(widget, {"kind": "code"}, [])  # an old loader's: answered at once
    state.apply(model.Exited(0, 0, 0.5))
    state.apply(model.Exited(1, 1, 0.5))
    widget.on_tick(state)
    kinds = [m["kind"] for m in sent]
    assert kinds.count("lines") >= 1 and kinds.count("stacks") == 2
    assert kinds.count("usage") == 2 and kinds.count("code") == 2, kinds
    assert any(m.get("skipped") for m in sent) and any("error" in m for m in sent)
    for message in sent:
        assert_valid(json.loads(json.dumps(message)), "toFrontEnd")  # as the comm carries it


def test_a_lines_message_with_tails_is_valid():
    batch = Batch(
        tiles=None,
        lines={3: [["out", "new\n"]]},
        dropped={3: 2},
        summary="",
        stopping="",
        finished=False,
        tails={7: [["out", "a\n"], ["err", "b\n"]]},
        earlier={7: 120},
    )
    message = batch.message()
    assert message is not None and "tails" in message
    assert_valid(message, "toFrontEnd")
    broken = {**message, "lines": {"3": [["stdout", "x"]]}}  # a stream the grid has no style for
    assert list(validator("toFrontEnd").iter_errors(broken))


def test_the_job_widgets_requests_are_read_as_the_schema_says(tmp_path):
    """The job widget reads the requests the schema describes (and sends nothing back)."""
    from monarch_jupyter.jobs.services import topology
    from monarch_jupyter.widgets.job import JobWidget
    from test_widgets import FakeSession, front_end, running

    admin = {"admin": "http://localhost:1/"}
    session = FakeSession(tmp_path, running(urls=admin))
    widget = JobWidget(
        session, session.current, sample=lambda urls, previous: topology.build([], previous), interval=0.01
    )
    sent: list[dict] = []
    widget.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]
    try:
        watch = {"kind": "watch", "view": "v1", "on": True}
        assert_valid(watch, "toKernel")
        front_end(widget, **watch)
        assert widget.watched
        front_end(widget, **{**watch, "on": False})
        deadline = time.monotonic() + 2
        while widget.watched and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not widget.watched
        assert sent == []
    finally:
        widget.close()
