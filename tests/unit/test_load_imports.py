"""``%load_ext`` imports only what the load and ``%job`` status need.

A fresh interpreter loads the extension into a plain IPython shell and reports ``sys.modules``:
Monarch, pyarrow, the widget libraries, urllib's HTTP stack and the ``%%remote`` run's modules
must not be among them (they are imported by the command that uses them), while the magics,
their parsers and the verbs are registered, so ``%remote?``, ``%job?`` and Tab still work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]

LOAD = """
import json, sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
before = set(sys.modules)
shell.run_line_magic("load_ext", "monarch_jupyter")
magics = shell.magics_manager.magics
from monarch_jupyter.jobs import args as job_args
from monarch_jupyter.remote.view import args
print(json.dumps({
    "new": sorted(set(sys.modules) - before),
    "built": sorted([*job_args.PARSERS._built, *args.PARSERS._built, *args.VERBS._built]),
    "line": sorted(magics["line"]),
    "cell": sorted(magics["cell"]),
}))
"""

#: what neither the load nor ``%job`` status needs (each a prefix of module names)
DEFERRED = (
    "monarch",  # Monarch itself: unpickling the cached job imports it, in the background
    "pyarrow",
    "pandas",
    "ipywidgets",
    "anywidget",
    "urllib.request",  # %job query's HTTP (services/query.py)
    "http.client",
    "monarch_jupyter.jobs.services.query",
    "monarch_jupyter.widgets.job",
    "monarch_jupyter.widgets.run",
    "monarch_jupyter.remote.run.runner",
    "monarch_jupyter.remote.run.drive",
    "monarch_jupyter.remote.view.model",
    "monarch_jupyter.remote.view.render",
    "monarch_jupyter.remote.run.index",
    "monarch_jupyter.remote.view.quiet",
    "monarch_jupyter.remote.run.grep",
    "monarch_jupyter.remote.view.stacks",
    "monarch_jupyter.remote.run.spool",
    "monarch_jupyter.remote.host",
    "monarch_jupyter.remote.rank_shell",
    "monarch_jupyter.actors",
)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    folder = tmp_path_factory.mktemp("nb")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
    }
    done = subprocess.run(
        [sys.executable, "-c", LOAD], cwd=folder, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_the_load_imports_none_of_the_deferred_modules(loaded: dict[str, list[str]]) -> None:
    found = {prefix: [m for m in loaded["new"] if _matches(m, prefix)] for prefix in DEFERRED}
    assert {prefix: names for prefix, names in found.items() if names} == {}


def test_the_load_registers_the_magics_and_the_verbs(loaded: dict[str, list[str]]) -> None:
    assert {"job", "remote"} <= set(loaded["line"]) and "remote" in loaded["cell"]
    for name in ("monarch_jupyter.remote.cell.verbs.runs", "monarch_jupyter.remote.cell.verbs.diagnose"):
        assert name in loaded["new"]


def test_the_load_builds_no_parser(loaded: dict[str, list[str]]) -> None:
    """argparse definitions are built on first use of their verb (or by %job? / %remote?)."""
    assert loaded["built"] == []


def test_the_job_help_lists_every_subcommand() -> None:
    from IPython.core.oinspect import getdoc

    from monarch_jupyter.jobs import args as job_args
    from monarch_jupyter.jobs.magic import JobMagics

    doc = getdoc(JobMagics.job) or ""  # what %job? shows (IPython's inspector)
    assert doc.startswith("Manage the Monarch job") and job_args.help_text() in doc
    for words in job_args.PARSERS:
        assert f"%job {words}" in doc or words == "status", words  # `%job [status [CONTEXT]]`


def test_the_listed_prefixes_do_catch_an_import() -> None:
    """The check above can fail: a module a command imports is caught by its prefix."""
    assert _matches("monarch_jupyter.remote.host.layout", "monarch_jupyter.remote.host")
    assert _matches("monarch.actor", "monarch") and not _matches("monarch_jupyter", "monarch")


def test_the_remote_help_lists_every_verb_without_a_run() -> None:
    from IPython.core.oinspect import getdoc

    from monarch_jupyter.remote.cell import verbs
    from monarch_jupyter.remote.cell.magic import RemoteMagics
    from monarch_jupyter.remote.view import args

    doc = getdoc(RemoteMagics.remote) or ""
    assert list(verbs.REGISTRY) == [
        "runs",
        "attach",
        "stop",
        "stacks",
        "grep",
        "debug",
        "shell",
        "session",
        "pull",
        "push",
    ]
    flat = " ".join(doc.split())  # a long synopsis is wrapped between its [...] groups
    for name in verbs.REGISTRY:
        assert f"{args.VERBS[name].synopsis}" in flat, name


def test_has_records_reads_the_folder_the_index_lists(tmp_path: Path) -> None:
    from monarch_jupyter.remote.cell.verbs.runs import has_records
    from monarch_jupyter.remote.run import index

    root = tmp_path / "nb"
    session = SimpleNamespace(layout=SimpleNamespace(dir=root / ".monarch"), context="default", root=root)
    assert not has_records(session)  # no folder yet
    runs_dir = index.where(session).runs_dir  # type: ignore[arg-type]
    runs_dir.mkdir(parents=True)
    (runs_dir / ".tmp.json").write_text("{}")
    assert not has_records(session)  # a file being written is not a run
    (runs_dir / "20261202T000000-abc.json").write_text("{}")
    assert has_records(session)


def test_the_preload_imports_the_widgets_then_a_runs_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from monarch_jupyter import widgets
    from monarch_jupyter.remote.cell.magic import RUN_MODULES

    imported: list[str] = []
    done = threading.Event()

    def record(name: str) -> None:
        imported.append(name)
        if name == RUN_MODULES[-1]:
            done.set()
        if name.endswith(".job"):
            raise ImportError("no widgets here")  # one failing import does not stop the others

    class Events:
        def __init__(self) -> None:
            self.callbacks: list = []

        def register(self, _name: str, callback) -> None:
            self.callbacks.append(callback)

        def unregister(self, _name: str, callback) -> None:
            self.callbacks.remove(callback)

    monkeypatch.setattr(widgets.importlib, "import_module", record)
    shell = SimpleNamespace(events=Events())
    widgets.preload(shell, delay=0.0, also=RUN_MODULES)
    assert imported == []  # nothing before the loading cell ends
    shell.events.callbacks[0]()
    assert done.wait(10)
    assert imported == ["monarch_jupyter.widgets.job", *RUN_MODULES] and shell.events.callbacks == []


def test_the_widgets_import_neither_ipywidgets_nor_anywidget() -> None:
    """The %job widget and the run grid speak the widget protocol themselves (comm_model.py):
    the first %job after a restart does not pay ~55 ms for the widget libraries."""
    code = (
        "import json, sys\n"
        "import monarch_jupyter.widgets.job, monarch_jupyter.widgets.run\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('ipywidgets', 'anywidget', 'psygnal'))))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
    }
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
