"""A big run's ranks space their messages out (the kernel's cost is per message):
the spec's ``flush_every`` reaches the real actors, which then batch a rank's lines that long,
and every line still arrives. Real kernel, real workers; ``flush_every`` is forced for 2 ranks."""

from __future__ import annotations

import json

import pytest

from harness import job_kernel

pytestmark = pytest.mark.kernel

OBSERVER = """import time as _t
from monarch_jupyter import remote as _remote

class _Arrivals:
    def __init__(self):
        self.at = {}

    def on_event(self, state, event):
        if type(event).__name__ == "Output":
            self.at.setdefault(event.index, []).append(_t.monotonic())

_arrivals = _Arrivals()
_remote.observers.append(_arrivals)
"""

PRINTING = (
    "%%remote python\nimport time\nfor i in range(30):\n    print(i, flush=True)\n    time.sleep(0.05)\n"
)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    with job_kernel(tmp_path_factory.mktemp("flush") / "nb", "hosts=2", OBSERVER) as kernel:
        yield kernel


def arrivals(kernel, cell: str) -> dict[str, list[float]]:
    kernel.ok("_arrivals.at.clear()")
    result = kernel.ok(cell)
    for rank in (0, 1):  # every line is shown, spaced out or not
        assert all(f"[hosts={rank}] {i}" in result.text for i in range(30)), result.text
    return json.loads(kernel.ok("import json; print(json.dumps(_arrivals.at))").stream())


def test_a_spaced_out_run_sends_a_ranks_lines_in_fewer_messages(kernel):
    plain = arrivals(kernel, PRINTING)
    kernel.ok(
        "import monarch_jupyter.remote.run.runner as _runner\n"
        "_kept = _runner.flush_every\n"
        "_runner.flush_every = lambda ranks: 0.3"
    )
    try:
        spaced = arrivals(kernel, PRINTING)
    finally:
        kernel.ok("_runner.flush_every = _kept")
    for rank in ("0", "1"):
        gaps = [b - a for a, b in zip(spaced[rank], spaced[rank][1:], strict=False)]
        # 1.5 s of printing: ~5 messages 0.3 s apart (the exit's own chunk may come sooner)
        assert len(spaced[rank]) <= 8 and min(gaps[:-1], default=0.3) >= 0.2, spaced[rank]
        assert len(plain[rank]) >= 12, plain[rank]  # 20 ms batches: about a message per line
