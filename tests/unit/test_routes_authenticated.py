"""Every route the server extension registers answers only Jupyter's authenticated users: each
HTTP method its handler defines is wrapped by ``tornado.web.authenticated`` (nothing of ours is
reachable on an open port or without the server's token)."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest
from traitlets.config import Config, Configurable

pytest.importorskip("jupyter_server")

import monarch_jupyter._server as server

METHODS = ("get", "post", "put", "patch", "delete", "head", "options")


def _routes() -> list[tuple[str, type]]:
    added: list[tuple[str, type]] = []
    web_app = SimpleNamespace(
        settings={"base_url": "/"}, add_handlers=lambda host, rules: added.extend((r[0], r[1]) for r in rules)
    )

    class App(Configurable):  # what the extension reads of jupyter_server's ServerApp
        pass

    app = App(config=Config())
    app.web_app, app.root_dir, app.log = web_app, "/tmp", SimpleNamespace(info=lambda *a: None)
    server._load_jupyter_server_extension(app)
    return added


def _authenticated(function: object) -> bool:
    """Whether ``tornado.web.authenticated`` wraps ``function`` (at any depth of decorators)."""
    seen = function
    while seen is not None:
        code = getattr(seen, "__code__", None)
        if code is not None and code.co_filename.endswith(("tornado/web.py",)) and code.co_name == "wrapper":
            return True
        seen = getattr(seen, "__wrapped__", None)
    return False


def test_every_route_handler_method_is_authenticated():
    routes = _routes()
    assert len(routes) >= 4, routes
    bare = []
    for pattern, handler in routes:
        for name in METHODS:
            method = inspect.getattr_static(handler, name, None)
            owner = next((k for k in handler.__mro__ if name in vars(k)), None)
            if method is None or owner is None or not owner.__module__.startswith("monarch_jupyter"):
                continue  # tornado's own default (405), not ours
            if not _authenticated(getattr(handler, name)):
                bare.append(f"{handler.__name__}.{name} ({pattern})")
    assert not bare, "handlers reachable without Jupyter's authentication: " + ", ".join(bare)


def test_the_check_sees_a_bare_method():
    from tornado import web

    class Bare(web.RequestHandler):
        def get(self) -> None: ...

    class Guarded(web.RequestHandler):
        @web.authenticated
        def get(self) -> None: ...

    assert not _authenticated(Bare.get) and _authenticated(Guarded.get)
