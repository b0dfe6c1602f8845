"""A run of many ranks in a real kernel stays a bounded view: 600 simulated ranks
(``benchmarks/_scale_driver.py``: the Monarch side replaced, everything after the port real)
print for 2 s; every cell write shows at most 24 ranks and folds the rest, the saved result is
bounded, and every line is in the run log."""

from __future__ import annotations

import json
import re
from pathlib import Path

from monarch_jupyter.remote.view.render import SHOW_RANKS

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
MIME = "application/vnd.monarch.remote+json"


def test_many_ranks_fold_in_the_cell_and_every_line_is_logged(kernel, workdir):
    kernel.ok(f"import sys; sys.path.insert(0, {str(BENCHMARKS)!r}); import _scale_driver")
    kernel.ok(f"_scale_driver.install(get_ipython(), {str(workdir)!r})")
    kernel.ok("_scale_driver.SETTINGS.update(ranks=600, seconds=2.0, rate=10.0, burst=0)")
    result = kernel.ok("%%remote bash --no-raise\nsimulated", timeout=120)
    writes = [o for o in result.outputs if o.msg_type == "stream"]
    assert len(writes) >= 5
    folded = 0
    for write in writes:
        ranks = set(re.findall(r"^\[(hosts=\d+)\] +step", write.content["text"], re.M))
        assert len(ranks) <= SHOW_RANKS, write.content["text"][:300]
        folded += "more ranks printed" in write.content["text"]
    assert folded >= 3  # 600 ranks print every 100 ms: the writes while they stream fold
    shown = set(re.findall(r"^\[(hosts=\d+)\] +step", result.stream(), re.M))
    assert len(shown) > 3 * SHOW_RANKS  # the ranks shown take turns
    final = [o.content["data"] for o in result.outputs if MIME in o.content.get("data", {})]
    payload = final[-1][MIME]
    assert payload["state"] == "finished" and len(payload["ranks"]) == 600
    assert len(json.dumps(final[-1])) < 2_000_000
    log = json.loads(kernel.ok("print(__import__('json').dumps(_scale_driver.check_log()))").stream())
    assert log["log_lines_missing"] == 0 and log["lines_sent"] >= 600 * 15
