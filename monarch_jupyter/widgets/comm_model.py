"""The Jupyter widget protocol (2.1) spoken over a plain comm, for anywidget's front end.

Our widgets need little of ipywidgets: a model whose state is plain JSON, updates sent in
batches, custom messages both ways, and the front end's own updates seen. Importing ipywidgets
and anywidget for that cost a measurable share of the first ``%job`` after a restart
(ipywidgets' package imports all of its ~25 widget modules; the figure is in
benchmarks/README.md, "load and first command"). :class:`Model` speaks the same messages as an ``anywidget.AnyWidget`` (the same
``comm_open`` state, ``update``, ``request_state``, ``custom``), so the browser side is
anywidget's own ``AnyModel`` / ``AnyView`` and saved notebooks are unchanged; the message
shapes are @jupyter-widgets/base's (``packages/schema/messages.md`` in ipywidgets).
tests/unit/test_comm_model.py pins the opening state against a real ``anywidget.AnyWidget``'s.

Not supported, because no widget here uses them: binary buffers, child widgets (``IPY_MODEL_``
references: no ``layout``), ``echo_update`` (one front end per kernel is what Jupyter runs).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import threading
from collections.abc import Callable, Iterable, Iterator
from importlib import metadata
from typing import Any, ClassVar, Generic, TypeVar, overload

TARGET = "jupyter.widget"  # the widget manager's comm target
PROTOCOL_VERSION = "2.1.0"  # @jupyter-widgets/base's, as ipywidgets 8 sends it
MIME = "application/vnd.jupyter.widget-view+json"

T = TypeVar("T")
Change = dict[str, Any]  # {"name", "old", "new", "owner", "type": "change"}: traitlets' shape


@functools.cache
def anywidget_version() -> str:
    """The semver range anywidget's front end registers under (``~0.11.*``), from its metadata."""
    try:
        major, minor = metadata.version("anywidget").split(".")[:2]
    except (metadata.PackageNotFoundError, ValueError):
        return "*"
    return f"~{major}.{minor}.*"


class Synced(Generic[T]):
    """A field of the model's state: read from it, written through :meth:`Model.set_trait`."""

    def __init__(self, default: T) -> None:
        self.default = default
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> Synced[T]: ...
    @overload
    def __get__(self, obj: Model, objtype: type | None = None) -> T: ...
    def __get__(self, obj: Model | None, objtype: type | None = None) -> T | Synced[T]:
        if obj is None:
            return self
        value: T = obj.get_field(self.name)
        return value

    def __set__(self, obj: Model, value: T) -> None:
        obj.set_trait(self.name, value)


class Model:
    """A widget model: the :class:`Synced` fields of its class are its synced state.

    Thread-safe as far as ipywidgets was: any thread may set fields or send; a front end's
    message is handled where the kernel dispatches comm messages (its main thread)."""

    _esm: ClassVar[str] = "export default {}"
    _css: ClassVar[str | None] = None
    _fields: ClassVar[dict[str, Synced[Any]]] = {}
    #: the open models by model id (ipywidgets' ``Widget.widgets``): a model lives until closed
    instances: ClassVar[dict[str, Model]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields: dict[str, Synced[Any]] = {}
        for klass in reversed(cls.__mro__):
            fields.update({k: v for k, v in vars(klass).items() if isinstance(v, Synced)})
        cls._fields = fields

    def __init__(self, **values: Any) -> None:
        unknown = set(values) - set(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no synced field {sorted(unknown)[0]!r}")
        self._state: dict[str, Any] = {k: copy.deepcopy(f.default) for k, f in self._fields.items()}
        self._state.update(values)
        self._lock = threading.RLock()
        self._holding = 0
        self._held: dict[str, None] = {}  # fields changed while held, in order
        self._on_msg: list[Callable[[Any, Any, list[Any]], None]] = []
        self._observers: list[tuple[frozenset[str], Callable[[Change], None]]] = []
        self._closed = False
        from comm import create_comm  # ipykernel's comm in a kernel, a DummyComm elsewhere

        self.comm = create_comm(
            target_name=TARGET,
            data={"state": self.get_state(), "buffer_paths": []},
            metadata={"version": PROTOCOL_VERSION},
        )
        self.comm.on_msg(self._handle_msg)
        self.model_id: str = self.comm.comm_id
        Model.instances[self.model_id] = self

    # ── state ──
    def _protocol_state(self) -> dict[str, Any]:
        """What anywidget's ``AnyWidget`` (a ``DOMWidget``) carries besides its fields."""
        version = anywidget_version()
        state: dict[str, Any] = {
            "_model_name": "AnyModel",
            "_model_module": "anywidget",
            "_model_module_version": version,
            "_view_name": "AnyView",
            "_view_module": "anywidget",
            "_view_module_version": version,
            "_view_count": None,
            "_dom_classes": [],
            "tabbable": None,
            "tooltip": None,
            "_anywidget_id": f"{type(self).__module__}.{type(self).__name__}",
            "_esm": self._esm,
        }
        if self._css is not None:
            state["_css"] = self._css
        return state

    def get_state(self, keys: Iterable[str] | None = None) -> dict[str, Any]:
        """The synced state (``keys`` only, if given), as the front end receives it."""
        if keys is None:
            return {**self._protocol_state(), **self._state}
        return {k: self._state[k] for k in keys}

    def get_field(self, name: str) -> Any:
        return self._state[name]

    def set_trait(self, name: str, value: Any) -> None:
        """Set a field; sent now, or when the outermost :meth:`hold_sync` ends."""
        if name not in self._fields:
            raise AttributeError(f"{type(self).__name__} has no synced field {name!r}")
        with self._lock:
            old = self._state[name]
            if old == value and type(old) is type(value):
                return
            self._state[name] = value
            held = bool(self._holding)
            if held:
                self._held[name] = None
        if not held:
            self.send_state([name])
        self._tell({"name": name, "old": old, "new": value, "owner": self, "type": "change"})

    @contextlib.contextmanager
    def hold_sync(self) -> Iterator[None]:
        """Changes made inside go to the front end as one ``update`` when the outermost ends."""
        with self._lock:
            self._holding += 1
        try:
            yield
        finally:
            with self._lock:
                self._holding -= 1
                keys = list(self._held) if not self._holding else []
                if not self._holding:
                    self._held.clear()
            if keys:
                self.send_state(keys)

    def send_state(self, key: str | Iterable[str] | None = None) -> None:
        """Send these fields' values (all the state for None) as one ``update``."""
        keys = [key] if isinstance(key, str) else key
        with self._lock:
            state = self.get_state(keys)
        self._send({"method": "update", "state": state, "buffer_paths": []})

    # ── messages ──
    def send(self, content: Any, buffers: list[Any] | None = None) -> None:
        """A custom message to the front end (anywidget's ``model.on("msg:custom")``)."""
        self._send({"method": "custom", "content": content}, buffers)

    def _send(self, msg: dict[str, Any], buffers: list[Any] | None = None) -> None:
        """Every message to the front end goes here (as in ipywidgets: tests wrap it)."""
        if not self._closed:
            self.comm.send(msg, buffers=buffers)

    def on_msg(self, callback: Callable[[Any, Any, list[Any]], None]) -> None:
        """``callback(model, content, buffers)`` for each custom message (``model.send``)."""
        self._on_msg.append(callback)

    def observe(self, callback: Callable[[Change], None], names: Iterable[str]) -> None:
        """``callback(change)`` when one of ``names`` changes (here or in the front end)."""
        self._observers.append((frozenset(names), callback))

    def _handle_msg(self, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data", {})
        method = data.get("method") if isinstance(data, dict) else None
        if method == "update" and isinstance(data.get("state"), dict):
            self._apply_update(data["state"])
        elif method == "request_state":  # a view opened later, e.g. after a page reload
            self.send_state()
        elif method == "custom":
            for callback in list(self._on_msg):
                callback(self, data.get("content"), msg.get("buffers") or [])

    def _apply_update(self, changes: dict[str, Any]) -> None:
        """The front end's new values: kept (not sent back), then the observers told."""
        told: list[Change] = []
        with self._lock:
            for name, new in changes.items():
                if name in self._fields and self._state[name] != new:
                    told.append(
                        {"name": name, "old": self._state[name], "new": new, "owner": self, "type": "change"}
                    )
                    self._state[name] = new
        for change in told:
            self._tell(change)

    def _tell(self, change: Change) -> None:
        for names, callback in list(self._observers):
            if change["name"] in names:
                callback(change)

    # ── lifetime, display ──
    def close(self) -> None:
        """Close the comm: the front end's views go, later changes are not sent."""
        if not self._closed:
            self._closed = True
            Model.instances.pop(self.model_id, None)
            with contextlib.suppress(Exception):  # a kernel shutting down
                self.comm.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.model_id}>"

    def _repr_mimebundle_(self, **_kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        return {
            "text/plain": repr(self),
            MIME: {"version_major": 2, "version_minor": 1, "model_id": self.model_id},
        }, {}
