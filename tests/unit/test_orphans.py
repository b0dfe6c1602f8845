"""Reaping the workers of unfinished applies never touches anything else."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from monarch_jupyter.system import orphans as _orphans


def _sleeper(env_extra: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**os.environ, **env_extra},
        start_new_session=True,
    )


def _record(folder, body: str, mode: int = 0o600):
    ctx = folder / ".monarch" / "default"
    ctx.mkdir(parents=True, exist_ok=True)
    path = ctx / f"{_orphans.PENDING_PREFIX}999999"
    path.write_text(body)
    path.chmod(mode)
    return path


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_only_processes_carrying_the_token_are_reaped(tmp_path, procs):
    token = uuid.uuid4().hex
    marked = _sleeper({_orphans.TOKEN_VAR: token})
    bystander = _sleeper({})
    procs += [marked, bystander]
    time.sleep(0.2)
    record = _record(
        tmp_path,
        f"owner 999999 1\ntoken {token} -\nworker {marked.pid} 1\nworker {bystander.pid} 1\n",
    )
    reaped = _orphans.reap_leftovers(tmp_path / ".monarch")
    assert reaped == [marked.pid]
    assert marked.wait(timeout=5) is not None
    assert bystander.poll() is None  # named in the record, but not ours to kill
    assert not record.exists()


def test_a_record_others_could_write_is_ignored(tmp_path, procs):
    token = uuid.uuid4().hex
    marked = _sleeper({_orphans.TOKEN_VAR: token})
    procs.append(marked)
    record = _record(tmp_path, f"owner 999999 1\ntoken {token} -\n", mode=0o666)
    assert _orphans.reap_leftovers(tmp_path / ".monarch") == []
    assert marked.poll() is None and record.exists()


def test_record_of_a_live_kernel_is_left_alone(tmp_path, procs):
    token = uuid.uuid4().hex
    marked = _sleeper({_orphans.TOKEN_VAR: token})
    procs.append(marked)
    parent = os.getppid()  # alive, and not us
    start = Path(f"/proc/{parent}/stat").read_text().rsplit(")", 1)[1].split()[19]
    record = _record(tmp_path, f"owner {parent} {start}\ntoken {token} -\n")
    assert _orphans.reap_leftovers(tmp_path / ".monarch") == []
    assert marked.poll() is None and record.exists()
