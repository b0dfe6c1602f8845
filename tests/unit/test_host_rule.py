"""The rule of ``remote/host/`` (stated in its ``__init__``): its modules travel to the workers by
value, so they import only the standard library, ``monarch`` (the actor), each other and the
stdlib-only leaves ``system.procfs``, ``system.files``, ``errors``, ``remote.protocol`` and
``remote.pyspy``."""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "monarch_jupyter"
HOST = PACKAGE / "remote" / "host"
LEAVES = {
    "monarch_jupyter.system.procfs",
    "monarch_jupyter.system.files",
    "monarch_jupyter.errors",
    "monarch_jupyter.remote.wire.protocol",
    "monarch_jupyter.remote.wire.pyspy",
}
MONARCH_ALLOWED = {"monarch_jupyter.remote.host.actor"}  # the one Monarch actor
# cloudpickle is Monarch's own dependency (it pickles actors with it): on every worker. The session
# modules send the namespace server by value with it, and a pulled value of a cell's own class.
CLOUDPICKLE_ALLOWED = {"monarch_jupyter.remote.host.session", "monarch_jupyter.remote.host.session_server"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _path_of(name: str) -> Path:
    base = PACKAGE.parent.joinpath(*name.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


RULED = sorted({_module_name(p) for p in HOST.glob("*.py")} | LEAVES)


def _imports(name: str) -> list[tuple[int, str]]:
    """``(line, absolute module)`` for every import in module ``name`` (relative ones resolved;
    ``from . import x`` counts as importing ``package.x``)."""
    path = _path_of(name)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            for alias in node.names:  # from .pkg import a, b: the modules pkg.a and pkg.b where they are
                sub = f"{target}.{alias.name}"
                is_sub = not node.module or (target.startswith("monarch_jupyter") and _path_of(sub).exists())
                found.append((node.lineno, sub if is_sub else target))
    return found


def _allowed(importer: str, imported: str) -> bool:
    top = imported.split(".")[0]
    if top in sys.stdlib_module_names or top == "__future__":
        return True
    if top == "monarch":
        return importer in MONARCH_ALLOWED
    if top == "cloudpickle":
        return importer in CLOUDPICKLE_ALLOWED
    return imported in RULED


@pytest.mark.parametrize("name", RULED)
def test_imports_only_what_travels_by_value(name):
    bad = [f"{name}:{line} imports {what}" for line, what in _imports(name) if not _allowed(name, what)]
    assert not bad, "\n".join(bad)


def test_the_rule_fails_on_a_kernel_side_import():
    assert not _allowed("monarch_jupyter.remote.host.runs", "monarch_jupyter.remote.run.runner")
    assert not _allowed("monarch_jupyter.remote.host.layout", "monarch")
    assert not _allowed("monarch_jupyter.remote.host.tail", "IPython")
    assert _allowed("monarch_jupyter.remote.host.tail", "monarch_jupyter.remote.host.layout")


def test_every_module_the_actor_needs_is_sent_by_value():
    """``engines.send_by_value`` finds them through the actor module's names (a module reached
    only through a constant would be pickled by reference, and a worker without
    monarch_jupyter could not import it)."""
    cloudpickle = pytest.importorskip("cloudpickle")
    from monarch_jupyter.jobs import engines
    from monarch_jupyter.remote.host import actor

    before = set(cloudpickle.list_registry_pickle_by_value())
    engines.send_by_value(actor)
    try:
        registered = set(cloudpickle.list_registry_pickle_by_value())
        needed = {m for m in RULED if m != "monarch_jupyter.remote.host"}
        assert needed <= registered, sorted(needed - registered)
    finally:
        for name in set(cloudpickle.list_registry_pickle_by_value()) - before:
            cloudpickle.unregister_pickle_by_value(sys.modules[name])


def test_the_host_modules_are_rebuilt_from_a_pickle_by_value(tmp_path):
    # a worker rebuilds every global of these modules from cloudpickle's copy: a class it
    # cannot rebuild (a TypedDict extending another, say) fails the actor's first call everywhere
    import importlib
    import subprocess

    import cloudpickle

    modules = [importlib.import_module(n) for n in RULED if n not in MONARCH_ALLOWED]
    for module in modules:
        cloudpickle.register_pickle_by_value(module)
    try:
        data = cloudpickle.dumps(modules)
    finally:
        for module in modules:
            cloudpickle.unregister_pickle_by_value(module)
    # another process, where monarch_jupyter cannot be imported (as on a worker with only
    # torchmonarch): in this one cloudpickle hands back the classes it already has, and anything
    # pickled by reference (a functools.cache wrapper, say) would import it and pass unnoticed
    shadow = tmp_path / "shadow" / "monarch_jupyter"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError('monarch_jupyter is not on this worker')\n"
    )
    rebuild = "import sys, cloudpickle; print(len(cloudpickle.loads(sys.stdin.buffer.read())))"
    done = subprocess.run(
        [sys.executable, "-c", rebuild],
        input=data,
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(shadow.parent)},
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().strip() == str(len(modules))
