"""Run a function right after a module is first imported, without importing it ourselves.

``%load_ext`` must not import Monarch (it costs seconds), yet the user's actors must be
covered from the cell that first imports ``monarch.actor`` and spawns procs in the same
breath (``this_host().spawn_procs(...)``): :func:`when_imported` puts a finder at the front
of ``sys.meta_path`` that wraps that one module's loader, so ``callback`` runs once the
module's body has run, still inside the importing statement. The finder removes itself
after the first import. A failing callback never fails the import.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any


class _Loader(importlib.abc.Loader):
    """The module's own loader, then ``callback``."""

    def __init__(self, inner: Any, callback: Callable[[], None]) -> None:
        self.inner = inner
        self.callback = callback

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        with contextlib.suppress(Exception):  # the import itself succeeded: never fail it
            self.callback()


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, callback: Callable[[], None]) -> None:
        self.name = name
        self.callback = callback

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> Any:
        if fullname != self.name:
            return None
        remove(self)
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, self.callback)
                return spec
        return None


def remove(finder: _Finder) -> None:
    with contextlib.suppress(ValueError):
        sys.meta_path.remove(finder)


_holds = 0  # > 0 while a job spec is imported (:func:`holding`)


@contextlib.contextmanager
def holding() -> Iterator[None]:
    """While this block runs, callbacks that check :func:`held` do nothing: ``%job apply``
    imports the user's spec module (which imports Monarch) and then its engine sets Monarch's
    transport (an SSH job: TCP), which fails once anything of ours has touched Monarch's
    runtime. Whoever holds is left to enable what was skipped (the next cell does)."""
    global _holds
    _holds += 1
    try:
        yield
    finally:
        _holds -= 1


def held() -> bool:
    return _holds > 0


def when_imported(name: str, callback: Callable[[], None]) -> None:
    """Call ``callback`` once ``name`` has been imported: now if it already is, else right after
    its first import (on the importing thread)."""
    if name in sys.modules:
        callback()
        return
    sys.meta_path.insert(0, _Finder(name, callback))
