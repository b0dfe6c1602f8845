"""``%remote grep`` over a big run: the kernel-side search of a run log in the real format.

    .venv/bin/python benchmarks/bench_grep.py [--lines 4000000] [--ranks 64] [--repeat 5]

Writes a synthetic run log with the real writer (:class:`~monarch_jupyter.remote.run.spool.Spool`,
heads big enough that nothing is skipped): ``--ranks`` ranks printing ``step N loss X`` lines in
interleaved chunks of 50, a few ``nan`` lines on two ranks and a warning per rank on stderr. Then
times :func:`monarch_jupyter.remote.run.grep.grep_log` + :func:`~monarch_jupyter.remote.run.grep.render`
(what the verb does before writing the cell) for a rare pattern, a case-insensitive one with
``-C 2`` and a pattern on every line (the per-stream cap of hits bounds its output). Medians in
ms, wall clock and this process's CPU time (the figure that holds on a loaded machine).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from monarch_jupyter.remote.host.search import compile_pattern
from monarch_jupyter.remote.run import grep
from monarch_jupyter.remote.run.index import RankRef
from monarch_jupyter.remote.run.spool import Spool


def write_log(path: Path, lines: int, ranks: int) -> int:
    labels = [f"hosts={i}" for i in range(ranks)]
    spool = Spool(path, labels, head=1 << 40)
    spool.note(f"%%remote python on mesh hosts ({ranks} ranks): 'train.py'")
    per_rank = lines // ranks
    for start in range(0, per_rank, 50):
        for rank in range(ranks):
            chunk = "".join(
                f"step {n} loss {1.0 / (n + 1):.6f}"
                + (" nan" if rank in (7, 40) and n % 20000 == 19999 else "")
                + "\n"
                for n in range(start, min(start + 50, per_rank))
            )
            spool.write(rank, "out", chunk)
    for rank in range(ranks):
        spool.write(rank, "err", "Warning: a deprecated flag\n")
    spool.close()
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=4_000_000)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    refs = [RankRef(f"hosts={i}", "hosts", {"hosts": i}, i) for i in range(options.ranks)]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "run.log")
        size = write_log(path, options.lines, options.ranks)
        print(f"log: {options.lines:,} lines on {options.ranks} ranks, {size / 1e6:.0f} MB")
        cases = {
            "rare: nan": ("nan", False, 0),
            "-i -C 2: WARNING": ("WARNING", True, 2),
            "every line: loss": ("loss", False, 0),
        }
        for name, (pattern, ignore_case, context) in cases.items():
            regex = compile_pattern(pattern, ignore_case)
            times, cpu = [], []
            for _ in range(options.repeat):
                start, start_cpu = time.perf_counter(), time.process_time()
                found, _ = grep.grep_log(path, regex, context, refs, ("out", "err"))
                text = grep.render("r", "train.py", pattern, found, "log")
                times.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
            matched = sum(f.count for f in found)
            print(
                f"{name:<18} median {statistics.median(times) * 1000:7.0f} ms  max {max(times) * 1000:7.0f} ms"
                f"  CPU {statistics.median(cpu) * 1000:6.0f} ms"
                f"  ({matched:,} matching lines, {len(text.splitlines()):,} lines of text)"
            )


if __name__ == "__main__":
    main()
