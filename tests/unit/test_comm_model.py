"""The widget protocol over a plain comm (widgets/comm_model.py): what it opens with is what a
real ``anywidget.AnyWidget`` opens with (anywidget's front end renders it), and the messages
both ways. No kernel: the comm is captured."""

from __future__ import annotations

import json
from typing import Any

import pytest

from monarch_jupyter.widgets import comm_model
from monarch_jupyter.widgets.comm_model import MIME, Model, Synced


class FakeComm:
    """What ``comm.create_comm`` returns, recording what is sent."""

    def __init__(self, **kwargs: Any) -> None:
        self.opened = kwargs
        self.comm_id = "c0ffee"
        self.sent: list[tuple[dict[str, Any], Any]] = []
        self.handler: Any = None
        self.closed = False

    def send(self, data: dict[str, Any], buffers: Any = None) -> None:
        self.sent.append((data, buffers))

    def on_msg(self, handler: Any) -> None:
        self.handler = handler

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def comms(monkeypatch) -> list[FakeComm]:
    made: list[FakeComm] = []

    def create_comm(**kwargs: Any) -> FakeComm:
        made.append(FakeComm(**kwargs))
        return made[-1]

    monkeypatch.setattr("comm.create_comm", create_comm)
    return made


class Counter(Model):
    _esm = "export default { render() {} }"
    count = Synced(0)
    label = Synced("")
    items: Synced[list[int]] = Synced([])


def test_the_opening_state_is_an_anywidgets(comms) -> None:
    anywidget = pytest.importorskip("anywidget")
    traitlets = pytest.importorskip("traitlets")

    class Real(anywidget.AnyWidget):
        _esm = "export default { render() {} }"
        count = traitlets.Int(0).tag(sync=True)
        label = traitlets.Unicode("").tag(sync=True)
        items = traitlets.List().tag(sync=True)

    real = json.loads(json.dumps(Real().get_state()))  # as sent: JSON
    real.pop("layout")  # a child Layout model's reference: no view here uses it
    comms.clear()
    ours = Counter().get_state()
    assert {**ours, "_anywidget_id": ""} == {**real, "_anywidget_id": ""}
    (comm,) = comms
    assert comm.opened["target_name"] == "jupyter.widget"
    assert comm.opened["metadata"] == {"version": "2.1.0"}
    assert comm.opened["data"] == {"state": ours, "buffer_paths": []}


def test_changes_are_sent_once_per_hold_and_not_when_unchanged(comms) -> None:
    model = Counter(label="a")
    (comm,) = comms
    model.count = 1
    with model.hold_sync():
        model.count = 2
        model.label = "b"
        model.label = "b"
    model.label = "b"  # unchanged: nothing sent
    assert [data for data, _ in comm.sent] == [
        {"method": "update", "state": {"count": 1}, "buffer_paths": []},
        {"method": "update", "state": {"count": 2, "label": "b"}, "buffer_paths": []},
    ]
    assert Counter.items.default == [] and model.items == [] and model.items is not Counter.items.default


def test_front_end_messages(comms) -> None:
    model = Counter()
    (comm,) = comms
    seen: list[Any] = []
    model.on_msg(lambda m, content, buffers: seen.append((m, content, buffers)))
    model.observe(lambda change: seen.append((change["name"], change["old"], change["new"])), names=["count"])

    def deliver(data: dict[str, Any]) -> None:
        comm.handler({"content": {"comm_id": "c0ffee", "data": data}, "buffers": []})

    deliver({"method": "update", "state": {"count": 5, "label": "x", "nope": 1}, "buffer_paths": []})
    deliver({"method": "custom", "content": {"kind": "hi"}})
    assert seen == [("count", 0, 5), (model, {"kind": "hi"}, [])]
    assert model.count == 5 and model.label == "x"
    assert comm.sent == []  # the front end's own values are not sent back
    deliver({"method": "request_state"})
    ((data, _),) = comm.sent
    assert (
        data["method"] == "update"
        and data["state"]["count"] == 5
        and data["state"]["_model_name"] == "AnyModel"
    )


def test_close_and_display(comms) -> None:
    model = Counter()
    (comm,) = comms
    bundle, _metadata = model._repr_mimebundle_()
    assert bundle[MIME] == {"version_major": 2, "version_minor": 1, "model_id": "c0ffee"}
    model.close()
    model.count = 3
    model.send({"late": True})
    assert comm.closed and comm.sent == []
    with pytest.raises(TypeError, match="no synced field 'bogus'"):
        Counter(bogus=1)


def test_the_front_ends_version_comes_from_anywidgets_metadata() -> None:
    pytest.importorskip("anywidget")
    from importlib import metadata

    major, minor = metadata.version("anywidget").split(".")[:2]
    assert comm_model.anywidget_version() == f"~{major}.{minor}.*"
