"""Batch scripts from a notebook: ``%job batch``, ``%job logs``, ``%job kill ID``.

A batch run is a client script started the way Monarch's batch mode starts one
(``LocalJob.apply(client_script=…)``: the script runs detached with
``MONARCH_BATCH_JOB=1`` and finds a ``BatchJob`` in ``.monarch/job_state.pkl`` of
its working directory), except that the working directory is the run's own
folder ``.monarch/<context>/batch/<id>/``. Monarch's batch mode writes to
``.monarch/job_state.pkl`` of the current folder, which is the active context's
cache through our symlink; here it never is.

Each run folder holds ``run.json`` (id, script, pid, start time), ``output.log``
(stdout and stderr), ``rc`` (the exit code, written by the wrapper shell when the
script ends) and ``killed`` (when ``%job kill ID`` stopped it). The script's own
folder is in ``$MONARCH_JUPYTER_NOTEBOOK_DIR``.

No IPython, no threads; reading follows the ``.monarch/`` rules (regular files
only, never blocking, bounded).
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import MonarchJupyterError
from ..runtime import introspect as _introspect
from ..system import procfs as _procfs
from ..system.files import private_dir, private_opener, read_small, write_atomic
from ..text import timefmt as _timefmt
from . import cache

BATCH_DIR = "batch"
_ID = re.compile(r"^b[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$")
TAIL_BYTES = 200_000
# The wrapper shell is the process-group leader; it records the script's exit code.
_WRAPPER = '"$0" "$1"; rc=$?; umask 077; echo $rc > "$2"'


@dataclass
class BatchRun:
    id: str
    script: str
    pid: int | None
    started: float
    folder: Path
    state: str  # running / exited 0 / failed (rc N) / killed / unknown; Slurm: pending / running / ended
    slurm_job_id: str | None = None

    @property
    def log(self) -> Path:
        if self.slurm_job_id:  # Slurm writes the client's output next to its workers'
            found = sorted(self.folder.glob(f"slurm_{self.slurm_job_id}_*.out"))
            return found[0] if found else self.folder / f"slurm_{self.slurm_job_id}.out"
        return self.folder / "output.log"


def is_id(text: str) -> bool:
    return bool(_ID.match(text or ""))


def _folder(context_dir: Path) -> Path:
    return context_dir / BATCH_DIR


# Run in a child process whose working directory is the run folder, so that Monarch's
# batch mode writes its BatchJob there. SlurmJob shlex-splits the client command inside
# the allocation: give it the job's Python and the script's absolute path.
_SUBMIT = """\
import importlib, json, shlex, sys
root, spec, script = sys.argv[1:4]
sys.path.insert(0, root)
module, _, attr = spec.rpartition(".")
job = getattr(importlib.import_module(module), attr)
if hasattr(job, "_log_dir"):
    job._log_dir = "."  # Slurm's output files in the run folder, where %job logs finds them
python = getattr(job, "_python_exe", sys.executable)
job.apply(client_script=f"{shlex.quote(python)} {shlex.quote(script)}")
print("MJ-SUBMITTED " + json.dumps({"slurm_job_id": getattr(job, "_slurm_job_id", None)}))
"""


def start(
    context_dir: Path, script: str, root: Path, spec: str | None = None, hosts: tuple[str, ...] = ("hosts",)
) -> BatchRun:
    """Start ``script`` detached in its own folder; returns at once.

    Without ``spec`` the script runs here (LocalJob); with a ``module.attr`` SlurmJob spec
    it is submitted from the run folder, with its ``log_dir`` set there.
    """
    path = Path(script)
    path = path if path.is_absolute() else (root / path)
    if not path.is_file():
        raise MonarchJupyterError(f"no script {script!r} here ({path})")
    run_id = f"b{_timefmt.utc_stamp()}-{uuid.uuid4().hex[:4]}"
    folder = _folder(context_dir) / run_id
    private_dir(folder)
    private_dir(folder / ".monarch")
    if spec is not None:
        return _submit(folder, run_id, path, root, spec)
    from monarch.job import LocalJob

    BatchJob = _introspect.batch_job_class()  # what LocalJob's batch mode writes

    cache.dump_job(BatchJob(LocalJob(hosts)), folder / ".monarch" / "job_state.pkl")
    env = {**os.environ, "MONARCH_BATCH_JOB": "1", "MONARCH_JUPYTER_NOTEBOOK_DIR": str(root)}
    with open(folder / "output.log", "wb", opener=private_opener) as out:
        proc = subprocess.Popen(
            ["bash", "-c", _WRAPPER, sys.executable, str(path), str(folder / "rc")],
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    started = time.time()
    _write_meta(folder, {"id": run_id, "script": str(path), "pid": proc.pid, "started": started})
    return BatchRun(run_id, str(path), proc.pid, started, folder, "running")


def _write_meta(folder: Path, meta: Mapping[str, object]) -> None:
    """``run.json``, whole or not at all: ``load`` may read it while it is written."""
    write_atomic(folder / "run.json", json.dumps(meta).encode())


def _submit(folder: Path, run_id: str, path: Path, root: Path, spec: str) -> BatchRun:
    env = {**os.environ, "MONARCH_JUPYTER_NOTEBOOK_DIR": str(root)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _SUBMIT, str(root), spec, str(path)],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        raise MonarchJupyterError(f"submitting {spec} did not finish in 120 s") from None
    write_atomic(folder / "submit.log", (done.stdout + done.stderr).encode())
    found = [line for line in done.stdout.splitlines() if line.startswith("MJ-SUBMITTED ")]
    job_id = json.loads(found[-1].split(" ", 1)[1]).get("slurm_job_id") if found else None
    if done.returncode != 0 or not job_id:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise MonarchJupyterError(
            f"submitting {spec} failed: {last} (log: {os.path.relpath(folder / 'submit.log')})"
        )
    started = time.time()
    meta = {"id": run_id, "script": str(path), "pid": None, "started": started, "slurm_job_id": str(job_id)}
    _write_meta(folder, meta)
    return BatchRun(run_id, str(path), None, started, folder, "pending", str(job_id))


def _slurm_state(job_id: str) -> str:
    try:
        out = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    state = out.stdout.strip().lower()
    return state if out.returncode == 0 and state else "ended"


def _read_small(path: Path, limit: int = 65536) -> str | None:
    """A small regular file's text, or None (missing, FIFO, symlink, huge)."""
    data = read_small(path, limit)
    return None if data is None else data.decode("utf-8", errors="replace")


def _ours(pid: int | None, folder: Path) -> bool:
    """``pid`` is still our wrapper shell (not a reused PID): its cwd is the run folder."""
    if pid is None or not _procfs.alive(pid):
        return False
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd")) == folder.resolve()
    except OSError:
        return False


def load(context_dir: Path, run_id: str) -> BatchRun:
    if not is_id(run_id):
        raise MonarchJupyterError(f"{run_id!r} is not a batch run id (they look like b20260101-120000-ab12)")
    folder = _folder(context_dir) / run_id
    meta = _read_small(folder / "run.json")
    try:
        data = json.loads(meta) if meta else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise MonarchJupyterError(f"no batch run {run_id} in this context: %job lists them")
    pid = data.get("pid") if isinstance(data.get("pid"), int) else None
    slurm_id = str(data["slurm_job_id"]) if data.get("slurm_job_id") else None
    if slurm_id:
        state = "killed" if (folder / "killed").exists() else _slurm_state(slurm_id)
        return BatchRun(
            run_id, str(data.get("script")), None, float(data.get("started") or 0), folder, state, slurm_id
        )
    if (folder / "killed").exists():
        state = "killed"
    elif _ours(pid, folder):
        state = "running"
    else:
        rc = (_read_small(folder / "rc") or "").strip()
        state = "exited 0" if rc == "0" else f"failed (rc {rc})" if rc else "unknown"
    return BatchRun(run_id, str(data.get("script")), pid, float(data.get("started") or 0), folder, state)


def runs(context_dir: Path) -> list[BatchRun]:
    folder = _folder(context_dir)
    try:
        names = sorted(p.name for p in folder.iterdir() if is_id(p.name))
    except OSError:
        return []
    found = []
    for name in names:
        try:
            found.append(load(context_dir, name))
        except MonarchJupyterError:
            continue
    return found


def kill(context_dir: Path, run_id: str, grace: float = 1.0) -> BatchRun:
    """Stop a batch run's process group: SIGTERM, then SIGKILL after ``grace`` seconds."""
    run = load(context_dir, run_id)
    if run.slurm_job_id:
        if run.state not in ("ended", "killed"):
            write_atomic(run.folder / "killed", str(time.time()).encode())
            subprocess.run(["scancel", run.slurm_job_id], capture_output=True, text=True, timeout=20)
            run.state = "killed"
        return run
    if run.state != "running" or run.pid is None:
        return run
    write_atomic(run.folder / "killed", str(time.time()).encode())
    pid = run.pid
    _procfs.escalate(
        lambda sig: _procfs.killpg(pid, sig),
        lambda: _procfs.alive(pid),
        grace,
        (signal.SIGTERM, signal.SIGKILL),
        0.05,
    )
    run.state = "killed"
    return run


def read_log(run: BatchRun, offset: int, limit: int = 1 << 20) -> tuple[str, int]:
    """New text of the run's log from ``offset``: ``(text, new offset)``; never blocks."""
    try:
        fd = os.open(run.log, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return "", offset
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "", offset
        os.lseek(fd, offset, os.SEEK_SET)
        data = os.read(fd, limit)
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace"), offset + len(data)


def follow(context_dir: Path, run_id: str, poll: float = 0.1) -> Iterator[str]:
    """Yield the log as it grows until the run ends (the caller's Ctrl-C stops following only)."""
    run = load(context_dir, run_id)
    size = run.log.stat().st_size if run.log.exists() else 0
    offset = max(0, size - TAIL_BYTES)
    while True:
        text, offset = read_log(run, offset)
        if text:
            yield text
            continue
        if load(context_dir, run_id).state not in ("running", "pending", "configuring", "completing"):
            text, offset = read_log(run, offset)
            if text:
                yield text
            return
        time.sleep(poll)


def lines(runs_: list[BatchRun]) -> str:
    return "\n".join(
        f"  batch     {r.id}  {r.state:<14} {Path(r.script).name}  log: {os.path.relpath(r.log)}"
        for r in runs_
    )
