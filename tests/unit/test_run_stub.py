"""The run grid's saved `_esm` is a small loader; the code comes from the server or the kernel."""

from __future__ import annotations

import pytest

pytest.importorskip("anywidget")

from monarch_jupyter.widgets.run import RUN_CSS, RUN_JS, RunWidget, code_version
from test_widgets import run_state


def test_the_widget_state_carries_a_loader_not_the_code() -> None:
    widget = RunWidget(run_state(2), title="%%remote")
    try:
        state = widget.get_state()
        assert len(state["_esm"]) < 3000, len(state["_esm"])
        assert state["_css"] == ""
        assert f"'{code_version()}'" in state["_esm"] and "monarch-jupyter/static/" in state["_esm"]
        assert "//" not in state["_esm"].split("\n")[0]  # comments stripped
        assert len(RUN_JS.read_text()) > 4 * len(state["_esm"])
    finally:
        widget.close()


def test_the_kernel_sends_the_code_on_request() -> None:
    widget = RunWidget(run_state(2), title="%%remote")
    sent: list[dict] = []
    widget.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]
    try:
        widget._on_front_end_msg(widget, {"kind": "code"}, [])
        assert sent == [{"kind": "code", "esm": RUN_JS.read_text(), "css": RUN_CSS.read_text()}]
    finally:
        widget.close()


def test_a_code_request_with_an_id_is_answered_once_whichever_thread_reads_it() -> None:
    """The loader's request carries an id: busy_comm's thread answers it while the cell runs,
    and the main thread's copy, read after the cell, sends nothing again."""
    import time

    widget = RunWidget(run_state(2), title="%%remote")
    sent: list[dict] = []
    widget.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]
    try:
        request = {"kind": "code", "id": "code-1"}
        widget._serve(request)  # as busy_comm's thread does
        widget._on_front_end_msg(widget, request, [])  # the main thread's copy, later
        time.sleep(0.2)  # that copy is handed to a thread too
        assert sent == [
            {"kind": "code", "id": "code-1", "esm": RUN_JS.read_text(), "css": RUN_CSS.read_text()}
        ]
    finally:
        widget.close()


def test_a_widget_module_not_built_is_one_line_saying_how(tmp_path):
    from monarch_jupyter.errors import MonarchJupyterError
    from monarch_jupyter.widgets.code import read_code

    with pytest.raises(MonarchJupyterError) as caught:
        read_code(tmp_path / "run.js")
    assert str(caught.value) == f"{tmp_path / 'run.js'} is not built: run `jlpm build` in labextension/"
    assert isinstance(caught.value, FileNotFoundError)
