"""The package's public names: importable from ``monarch_jupyter``, typed, and still cheap to import."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import monarch_jupyter
from monarch_jupyter.errors import MonarchJupyterError
from monarch_jupyter.remote.errors import RemoteError

ROOT = Path(__file__).resolve().parents[2]


def test_every_name_in_all_resolves():
    for name in monarch_jupyter.__all__:
        assert getattr(monarch_jupyter, name) is not None, name
    assert set(monarch_jupyter.__all__) <= set(dir(monarch_jupyter))
    assert {"actors", "__version__"} <= set(dir(monarch_jupyter))


def test_errors_are_the_ones_raised():
    from monarch_jupyter import MonarchJupyterError as exported_base
    from monarch_jupyter import RemoteError as exported

    assert exported is RemoteError and exported_base is MonarchJupyterError
    assert issubclass(exported, exported_base)


def test_unknown_name_is_an_attribute_error():
    try:
        monarch_jupyter.no_such_name  # noqa: B018
    except AttributeError as error:
        assert "no_such_name" in str(error)
    else:
        raise AssertionError("monarch_jupyter.no_such_name resolved")


def test_public_functions_name_their_return_types():
    returns = {
        name: inspect.signature(getattr(monarch_jupyter, name)).return_annotation
        for name in ("current_session", "job", "state")
    }
    assert returns == {"current_session": "JobContext", "job": "JobTrait", "state": "JobState"}


def test_importing_the_package_and_its_errors_loads_neither_monarch_nor_the_session():
    code = (
        "import sys\n"
        "from monarch_jupyter import RemoteError, MonarchJupyterError\n"
        "loaded = [m for m in ('monarch', 'IPython', 'monarch_jupyter.jobs.facade', 'monarch_jupyter.remote.run.runner')"
        " if m in sys.modules]\n"
        "print(loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
