"""The installed package ships its JupyterLab and server extensions enabled; the wheel and sdist built
from this checkout carry what an install needs (LICENSE, py.typed, install.json, the prebuilt
labextension, the server config) and no tests, caches or node_modules."""

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from harness import TAG_VAR

# each `jupyter … list` boots the Jupyter application and loads every installed extension (~3 s)
pytestmark = pytest.mark.daemon


def jupyter(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_labextension_is_prebuilt_and_enabled():
    lines = [line for line in jupyter("labextension", "list").splitlines() if "monarch_jupyter" in line]
    assert lines, "monarch_jupyter is not among the installed labextensions"
    assert "enabled" in lines[0] and "OK" in lines[0], lines[0]


def test_server_extension_is_enabled():
    lines = [
        line
        for line in jupyter("server", "extension", "list").splitlines()
        if "monarch_jupyter._server" in line
    ]
    assert lines and "enabled" in lines[0], lines


def test_version_is_written_once():
    """labextension/package.json holds the version; the wheel, the module and the
    built labextension all report it, and no other source file repeats it."""
    from importlib.metadata import version

    import monarch_jupyter

    root = Path(__file__).resolve().parents[2]
    declared = json.loads((root / "labextension/package.json").read_text())["version"]
    assert version("monarch_jupyter") == declared
    assert monarch_jupyter.__version__ == declared
    built = root / "monarch_jupyter/labextension/package.json"
    if built.exists():
        assert json.loads(built.read_text())["version"] == declared
    pyproject = (root / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert not re.search(r"(?m)^version\s*=", pyproject), "pyproject.toml must not repeat the version"
    init = (root / "monarch_jupyter/__init__.py").read_text()
    assert declared not in init, "monarch_jupyter/__init__.py must not repeat the version"


# ── the wheel and the sdist, built from this checkout ─────────────────────
# Built without build isolation (no network: the build backend comes from the `test` extra) and
# with an empty PATH, so no Node.js, npm or jlpm can run: the prebuilt labextension that
# `scripts/setup.sh` leaves in monarch_jupyter/labextension/ satisfies `skip-if-exists`.

ROOT = Path(__file__).resolve().parents[2]
PREBUILT = ROOT / "monarch_jupyter/labextension"
FORBIDDEN = re.compile(r"(^|/)(tests|node_modules|__pycache__|\.monarch|test-artifacts)/|\.py[co]$")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    if not (PREBUILT / "static/style.js").is_file():
        pytest.fail(f"no prebuilt labextension in {PREBUILT}: run scripts/setup.sh (it builds it)")
    out = tmp_path_factory.mktemp("dist")
    env = {**os.environ, "PATH": str(tmp_path_factory.mktemp("empty-path"))}
    commands = [
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            ".",
        ],
        [sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-d", str(out)],
    ]
    for command in commands:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("monarch_jupyter-*.whl")
    (sdist,) = out.glob("monarch_jupyter-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def test_the_build_backend_is_in_the_test_group():
    """`pip wheel --no-build-isolation` (above, and offline builds) needs the build-system's
    requirements installed: the `test` dependency group carries the same ones, and the package's
    own metadata carries no development tool (they are groups, not extras)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    group = project["dependency-groups"]["test"]
    for requirement in project["build-system"]["requires"]:
        assert requirement in group, f"{requirement} is missing from the test group"
    # the extras are for users (the server's environment, to_pandas()), never development tools
    extras = project["project"]["optional-dependencies"]
    assert set(extras) == {"server", "pandas"}
    assert [r.split(">")[0].split("=")[0] for r in extras["pandas"]] == ["pandas"]


def test_the_wheel_ships_what_an_install_needs_and_nothing_else(built):
    with zipfile.ZipFile(built["wheel"]) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry_points = wheel.read(
            next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        ).decode()
    # the private-network kernel's provisioner, found by jupyter_client by this name
    assert (
        "[jupyter_client.kernel_provisioners]\n"
        "monarch-private-net = monarch_jupyter.system.private_provisioner:PrivateNetProvisioner"
    ) in entry_points, entry_points
    data = next(n for n in names if ".data/data/" in n).split(".data/data/")[0] + ".data/data/"
    labext = data + "share/jupyter/labextensions/monarch_jupyter/"
    shipped = set(names)
    expected = {
        "monarch_jupyter/py.typed",
        "monarch_jupyter/schema/remote-run.schema.json",
        "monarch_jupyter/schema/run_entry.schema.json",
        "monarch_jupyter/widgets/run.js",  # built from labextension/widgets/ (git-ignored)
        "monarch_jupyter/widgets/job.js",
        "monarch_jupyter/widgets/run.css",
        "monarch_jupyter/widgets/run_stub.js",
        labext + "install.json",
        data + "etc/jupyter/jupyter_server_config.d/monarch_jupyter.json",
    }
    expected |= {labext + p.relative_to(PREBUILT).as_posix() for p in PREBUILT.rglob("*") if p.is_file()}
    expected |= {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "monarch_jupyter").rglob("*.py")
        if PREBUILT not in p.parents
    }
    assert expected - shipped == set()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    assert any(n.startswith(labext + "static/remoteEntry.") for n in names)
    assert [n for n in names if FORBIDDEN.search(n)] == []
    install = json.loads((ROOT / "install.json").read_text())
    assert install == {
        "packageManager": "python",
        "packageName": "monarch_jupyter",
        "uninstallInstructions": "Use your Python package manager (pip, conda, etc.) to uninstall the package monarch_jupyter",
    }
    for classifier in (
        "Framework :: Jupyter :: JupyterLab :: Extensions :: Prebuilt",
        "Operating System :: POSIX :: Linux",
    ):
        assert f"Classifier: {classifier}\n" in metadata, classifier
    # PEP 639: the licence as an SPDX expression and its file, no licence classifier beside them
    assert "License-Expression: BSD-3-Clause\n" in metadata and "License-File: LICENSE\n" in metadata
    assert "Classifier: License ::" not in metadata
    assert (
        "Author: The monarch_jupyter contributors" in metadata
        or "The monarch_jupyter contributors" in metadata
    )
    assert "Project-URL: " in metadata


def test_the_sdist_carries_the_sources_and_the_prebuilt_labextension(built):
    with tarfile.open(built["sdist"]) as sdist:
        names = [name.split("/", 1)[1] for name in sdist.getnames() if "/" in name]
    for needed in (
        "LICENSE",
        "README.md",
        "CHANGELOG.md",
        "CONTRIBUTING.md",
        "pyproject.toml",
        "install.json",
        "labextension/package.json",
        "labextension/yarn.lock",
        "monarch_jupyter/py.typed",
        "monarch_jupyter/labextension/static/style.js",  # prebuilt: an install from the sdist needs no Node.js
        "monarch_jupyter/widgets/run.js",  # likewise the anywidget modules
        "monarch_jupyter/widgets/job.js",
        "labextension/widgets/run.ts",  # and their sources
        "jupyter-config/jupyter_server_config.d/monarch_jupyter.json",
    ):
        assert needed in names, needed
    leftovers = [
        n for n in names if re.search(r"(^|/)(node_modules|__pycache__|\.monarch|\.yarn)/|\.py[co]$", n)
    ]
    assert leftovers == []
    assert not any(n.startswith("labextension/lib/") for n in names)


# ── the wheel installed alone into a fresh venv, with no Node.js on PATH ──
CLEAN_CHECK = """\
%load_ext monarch_jupyter
%job apply --local hosts=2
%remote echo hi-from-$MONARCH_RANK_hosts
import monarch_jupyter, shutil
print("NODE", shutil.which("node"), "FROM", monarch_jupyter.__file__)
%job kill
"""


def _venv(tmp_path: Path, tag: str, name: str):
    """A fresh venv and a runner of commands in it, with no Node.js on PATH (bash for %%remote)."""
    venv = tmp_path / name
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    tools = tmp_path / f"{name}-bin"  # bash for %%remote on the workers; no node, npm or jlpm
    tools.mkdir()
    for tool in ("bash", "sh"):
        (tools / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    env = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": f"{venv / 'bin'}:{tools}", TAG_VAR: tag}

    def run(*command: str, cwd: Path = tmp_path, timeout: float = 120, ok: bool = True) -> str:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        assert (done.returncode == 0) == ok, done.stdout + done.stderr
        return done.stdout + done.stderr

    return venv, run


def _pip(run, venv: Path, *args: str) -> None:
    run(
        str(venv / "bin/python"),
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        *args,
        timeout=600,
    )


@pytest.mark.timeout(900)
def test_the_wheel_alone_in_a_kernel_venv(built, tmp_path, tag):
    """What a kernel environment gets from `pip install monarch_jupyter.whl` (dependencies from
    the package registry): no JupyterLab nor Jupyter server, and %load_ext, %job and a %%remote
    run in IPython of that venv, the code coming from the venv, not from this checkout."""
    venv, run = _venv(tmp_path, tag, "kernel")
    _pip(run, venv, str(built["wheel"]))
    python = str(venv / "bin/python")
    for absent in ("jupyterlab", "jupyter_server"):
        run(python, "-c", f"import {absent}", ok=False)
    notebook = tmp_path / "nb"
    notebook.mkdir()
    (notebook / "check.ipy").write_text(CLEAN_CHECK)
    out = run(str(venv / "bin/ipython"), "--no-banner", "--colors=NoColor", "check.ipy", cwd=notebook)
    assert "applied: context 'default': ProcessJob hosts×2 (2 live)" in out, out
    assert "[hosts=0] hi-from-0" in out and "[hosts=1] hi-from-1" in out, out
    assert f"NODE None FROM {venv}/lib/" in out, out
    assert "killed the job of context 'default'" in out, out


@pytest.mark.timeout(900)
def test_the_wheel_in_a_server_venv_without_monarch(built, tmp_path, tag):
    """A server environment: JupyterLab and the wheel without its kernel-side dependencies
    (`pip install --no-deps`): both extensions found and loadable, no Monarch anywhere."""
    venv, run = _venv(tmp_path, tag, "server")
    _pip(run, venv, "jupyterlab>=4,<5")
    _pip(run, venv, "--no-deps", str(built["wheel"]))
    run(str(venv / "bin/python"), "-c", "import monarch", ok=False)
    labext = [
        line
        for line in run(str(venv / "bin/jupyter"), "labextension", "list").splitlines()
        if "monarch_jupyter" in line
    ]
    assert labext and "enabled" in labext[0] and "OK" in labext[0], labext
    assert "(python, monarch_jupyter)" in labext[0], labext  # read from install.json
    server = run(str(venv / "bin/jupyter"), "server", "extension", "list")
    assert re.search(r"monarch_jupyter\._server\s+\S*enabled", server), server
    assert re.search(r"monarch_jupyter\._server\s+[0-9.]+\s+\S*OK", server), (
        server
    )  # imported without Monarch
    version = json.loads((ROOT / "labextension/package.json").read_text())["version"]
    assert re.search(rf"monarch_jupyter\._server {re.escape(version)}\s", server), server  # its version shown
    listed = run(
        str(venv / "bin/python"),
        "-c",
        "import json, sys; from monarch_jupyter._server.contexts import list_contexts;"
        "print(json.dumps(list_contexts('.'))); print(sorted(m for m in sys.modules if m.startswith('monarch')))",
    )
    assert '"contexts": []' in listed and "'monarch'" not in listed, listed
