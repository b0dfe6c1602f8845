"""Time %job apply, first and warm %%remote for SSHJob (2 hosts) and SlurmJob (1 node)
against the real loopback sshd and single-node Slurm of the tests (tests/daemons.py).

    python benchmarks/bench_clusters.py [--repeat 3]

Prints one table: median and max of each step over the repeats.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _report import print_steps

from daemons import Slurm, Sshd, free_port
from harness import TAG_VAR, Kernel, new_tag, reap


def timed(kernel: Kernel, code: str) -> float:
    result = kernel.execute(code, timeout=300)
    if result.error or "UsageError" in result.text:
        raise SystemExit(f"{code!r} failed: {result.text}")
    return result.duration * 1000


def run(kernel: Kernel, steps: dict, engine: str, spec: str) -> None:
    timed(kernel, "%load_ext monarch_jupyter")
    steps.setdefault(f"{engine}: %job apply (cold)", []).append(timed(kernel, f"%job apply {spec}"))
    steps.setdefault(f"{engine}: first %%remote bash", []).append(timed(kernel, "%%remote bash\ntrue"))
    warm = [timed(kernel, "%%remote bash\ntrue") for _ in range(5)]
    steps.setdefault(f"{engine}: warm %%remote bash (median of 5)", []).append(statistics.median(warm))
    steps.setdefault(f"{engine}: %job kill", []).append(timed(kernel, "%job kill"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    steps: dict[str, list[float]] = {}
    tag = new_tag()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        sshd = Sshd(tmp_path / "sshd", {TAG_VAR: tag}).start()
        slurm = Slurm(tmp_path / "slurm").start()
        try:
            for i in range(args.repeat):
                folder = tmp_path / f"nb{i}"
                folder.mkdir()
                port = free_port()
                sshd.ports_used.add(port)
                (folder / "sjobs.py").write_text(
                    "from monarch_jupyter.slurm import SlurmJob\n"
                    f"one = SlurmJob({{'hosts': 1}}, python_exe={sys.executable!r}, monarch_port={free_port()}, "
                    f"exclusive=False, log_dir={str(folder)!r})\n"
                )
                for engine, spec, env in (
                    (
                        "SSHJob 2 hosts",
                        f"--ssh hosts=127.0.0.2,127.0.0.3 --python {sys.executable} --port {port} "
                        f"--config {sshd.ssh_config}",
                        None,
                    ),
                    ("SlurmJob 1 node", "sjobs.one", slurm.env),
                ):
                    kernel = Kernel(folder, tag, env)
                    try:
                        run(kernel, steps, engine, spec)
                    finally:
                        kernel.shutdown()
        finally:
            sshd.stop()
            slurm.stop()
            reap(tag)
    print_steps(steps, args.repeat, "loopback daemons, real kernel")


if __name__ == "__main__":
    main()
