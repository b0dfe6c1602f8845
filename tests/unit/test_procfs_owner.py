"""#18.15: a marker in another user's environment does not make the process ours."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from monarch_jupyter.system import procfs as _procfs


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_pids_with_env_skips_other_users():
    value = uuid.uuid4().hex
    env = {**os.environ, "MJ_OWNER_TEST": value}
    code = "import time; time.sleep(30)"
    mine = subprocess.Popen([sys.executable, "-c", code], env=env)
    theirs = subprocess.Popen(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code], env=env
    )
    try:
        time.sleep(0.5)
        assert _procfs.owner(theirs.pid) == 65534
        assert _procfs.pids_with_env("MJ_OWNER_TEST", [value]) == {value: [mine.pid]}
    finally:
        for proc in (mine, theirs):
            proc.kill()
            proc.wait()
