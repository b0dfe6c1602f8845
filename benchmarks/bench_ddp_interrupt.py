"""Sessions where DDP breaks, through a real kernel, real workers and real torch (gloo, CPU):

- **Ctrl-C inside a DDP loop**, ``--tries`` times (default 20): a 4-rank session trains in a
  ``while True`` loop, the kernel is interrupted 1–3 s in (so ranks are inside gloo's
  all-reduce at random points); measured: interrupt → the cell's end, how many ranks were
  kept blocked, whether every namespace still holds its variables; then
  ``%remote session unblock`` and its time. At the end, 10 more DDP steps and the weights
  compared across ranks.
- **One rank raises before ``all_reduce``**, ``--raises`` times (default 5): the failed rank's
  traceback's arrival → the line naming the waiting ranks' arrival (the goal: ≤ 5 s).

    .venv/bin/python benchmarks/bench_ddp_interrupt.py [--tries 20] [--raises 5] [--hosts 2] [--per-host 2]

Timings are reported, never asserted (benchmarks/README.md has the figures).
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness import job_kernel

DDP = "%%remote python --session ddp\n"
SETUP = (
    DDP + "import torch, torch.distributed as dist\n"
    "from torch.nn.parallel import DistributedDataParallel as DDP\n"
    "dist.init_process_group('gloo')\n"
    "torch.manual_seed(0)\n"
    "model = DDP(torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)))\n"
    "optimizer = torch.optim.SGD(model.parameters(), lr=0.001)\n"
    "generator = torch.Generator().manual_seed(dist.get_rank())\n"
    "marker = 1000 + dist.get_rank()\n"
    "def step():\n"
    "    x = torch.randn(128, 256, generator=generator)\n"
    "    loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()\n"
    "    optimizer.zero_grad(); loss.backward(); optimizer.step()\n"
    "    return loss.item()\n"
    "step()"
)


def stats(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"median {statistics.median(values):.2f} s, p90 {p90:.2f} s, max {max(values):.2f} s (n={len(values)})"


def kept(kernel, ranks: int) -> bool:
    out = kernel.execute(DDP + "marker", timeout=120).stream("stdout")
    return all(f"(1): {1000 + r}" in out for r in range(ranks)) or f"({ranks}):" in out


def interrupts(kernel, tries: int, ranks: int) -> None:
    ends, unblocks, blocked_counts, kept_count = [], [], [], 0
    for attempt in range(tries):
        delay = random.uniform(1.0, 3.0)
        sent: dict[str, float] = {}

        def interrupt(at: dict[str, float] = sent) -> None:
            at["t"] = time.monotonic()
            kernel.interrupt()

        timer = threading.Timer(delay, interrupt)
        timer.start()
        r = kernel.execute(DDP + "n = 0\nwhile True:\n    step(); n += 1", timeout=180)
        timer.cancel()
        end = time.monotonic()
        ends.append(end - sent.get("t", end))
        error = r.error["evalue"] if r.error else ""
        blocked_counts.append(error.count("blocked in"))
        t0 = time.monotonic()
        kernel.execute("%remote session unblock ddp", timeout=180)
        unblocks.append(time.monotonic() - t0)
        ok = kept(kernel, ranks)
        kept_count += ok
        print(
            f"try {attempt + 1:2d}: interrupt at {delay:.1f} s, cell ended {ends[-1]:.2f} s later, "
            f"{blocked_counts[-1]} blocked, unblock {unblocks[-1]:.2f} s, variables kept: {ok}",
            flush=True,
        )
    steps = kernel.execute(DDP + "losses = [step() for _ in range(10)]\nlen(losses)", timeout=180)
    weights = kernel.execute("w = %remote pull --session ddp model.module[0].weight.detach().sum().item()\nw")
    same = f"({ranks}):" in weights.text
    print()
    print(f"Ctrl-C → cell's end:      {stats(ends)}")
    print(f"%remote session unblock:  {stats(unblocks)}")
    print(f"tries with ranks blocked: {sum(1 for b in blocked_counts if b)} of {tries}")
    print(f"every namespace kept:     {kept_count} of {tries}")
    print(
        f"10 DDP steps after:       {'ok' if steps.error is None else 'FAILED'}; weights equal on every rank: {same}"
    )


def raises(kernel, tries: int) -> None:
    named = []
    for _ in range(tries):
        at: dict[str, float] = {}

        def on_output(out, at: dict[str, float] = at) -> None:
            text = out.content.get("text", "")
            if "bad batch" in text:
                at.setdefault("failed", out.t)
            if re.search(r"still running \d+ s after", text):
                at.setdefault("named", out.t)

        timer = threading.Timer(12.0, kernel.interrupt)
        timer.start()
        kernel.execute(
            DDP + "if dist.get_rank() == 1:\n    raise ValueError('bad batch')\n"
            "t = torch.ones(1)\ndist.all_reduce(t)",
            timeout=180,
            on_output=on_output,
        )
        timer.cancel()
        kernel.execute("%remote session unblock ddp", timeout=180)
        if "named" in at and "failed" in at:
            named.append(at["named"] - at["failed"])
        print(f"failure → waiting ranks named: {named[-1]:.2f} s" if named else "not named", flush=True)
    print(f"\none rank raises → the others named: {stats(named)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--raises", type=int, default=5)
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--per-host", type=int, default=2)
    args = parser.parse_args()
    ranks = args.hosts * args.per_host
    with job_kernel(Path(tempfile.mkdtemp(prefix="bench-ddp")) / "nb", f"hosts={args.hosts}") as kernel:
        kernel.ok(f"%remote session start ddp --torch --per-host gpus={args.per_host}", timeout=300)
        kernel.ok(SETUP, timeout=300)
        raises(kernel, args.raises)
        print()
        interrupts(kernel, args.tries, ranks)


if __name__ == "__main__":
    main()
