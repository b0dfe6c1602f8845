"""``%%remote --torch`` with real workers: torch's rank variables on every rank of 2 hosts × 2
procs, and (when torch is installed) a real torch.distributed gloo all-reduce across them."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from harness import job_kernel, usage_error

pytestmark = pytest.mark.kernel

VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("torch") / "nb", "hosts=2", "%remote true") as kernel:
        yield kernel


def rank_lines(text: str) -> dict[str, dict[str, str]]:
    """``[hosts=0,gpus=1] {...}`` lines → label → the JSON the rank printed."""
    found = {}
    for line in text.splitlines():
        label, _, rest = line.partition("] ")
        if label.startswith("[") and rest.startswith("{"):
            found[label[1:]] = json.loads(rest)
    return found


def test_every_rank_gets_torchs_variables(shared):
    code = f"import json, os; print(json.dumps({{k: os.environ.get(k) for k in {VARS!r}}}))"
    result = shared.ok(f"%%remote python --torch --per-host gpus=2\n{code}")
    seen = rank_lines(result.stream("stdout"))
    assert sorted(seen) == ["hosts=0,gpus=0", "hosts=0,gpus=1", "hosts=1,gpus=0", "hosts=1,gpus=1"], (
        result.text
    )
    for label, env in seen.items():
        point = dict((k, int(v)) for k, v in (part.split("=") for part in label.split(",")))
        assert env["RANK"] == str(point["hosts"] * 2 + point["gpus"])
        assert env["LOCAL_RANK"] == str(point["gpus"])
        assert env["GROUP_RANK"] == str(point["hosts"])
        assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]) == ("4", "2")
    masters = {(env["MASTER_ADDR"], env["MASTER_PORT"]) for env in seen.values()}
    assert len(masters) == 1, masters  # one master for the run: the first rank's host
    ((addr, port),) = masters
    assert addr == socket.gethostname() and 0 < int(port) < 65536
    # without --torch, nothing of it
    plain = shared.ok(f"%%remote python --per-host gpus=2\n{code}")
    assert all(v is None for env in rank_lines(plain.stream("stdout")).values() for v in env.values())


def test_a_subset_is_one_line(shared):
    assert "--torch and --rank exclude each other" in usage_error(
        shared.execute("%%remote --torch --rank 1\necho x")
    )


def test_a_gloo_all_reduce_across_2_hosts_by_2_procs(shared):
    code = (
        "import torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "t = torch.tensor([float(dist.get_rank() + 1)])\n"
        "dist.all_reduce(t)\n"
        "print('sum', int(t.item()), 'of', dist.get_world_size())\n"
        "dist.destroy_process_group()\n"
    )
    result = shared.ok(f"%%remote python --torch --per-host gpus=2 --timeout 120\n{code}", timeout=180)
    out = [line.split("] ", 1)[1] for line in result.stream("stdout").splitlines() if "] sum" in line]
    assert out == ["sum 10 of 4"] * 4, result.text


def test_the_readme_ddp_example_runs(shared):
    """The `%%remote` guide's DDP example, as written there, on 2 hosts x 2 procs."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "remote.md").read_text()
    start = readme.index("%%remote python --torch --per-host gpus=2\n")
    cell = readme[start : readme.index("```", start)]
    result = shared.ok(cell, timeout=180)
    out = sorted(
        line.split("] ", 1)[1] for line in result.stream("stdout").splitlines() if " of 4 local " in line
    )
    assert out == ["0 of 4 local 0", "1 of 4 local 1", "2 of 4 local 0", "3 of 4 local 1"], result.text
