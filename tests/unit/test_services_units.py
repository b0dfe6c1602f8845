"""Job services: the spec forms, the listening-socket parser, the loopback rule (pure parts)."""

from __future__ import annotations

import pytest

from monarch_jupyter import _procfs
from monarch_jupyter.errors import SpecError
from monarch_jupyter.services import is_loopback
from monarch_jupyter.specs.base import LocalSpec
from monarch_jupyter.specs.local import split_services
from monarch_jupyter.specs.parse import parse_apply, spec_from_saved


@pytest.mark.parametrize(
    ("line", "services", "path"),
    [
        ("--local hosts=2 --telemetry", ("telemetry",), "monarch_jupyter.local_jobs.hosts_2__telemetry"),
        ("--telemetry --local hosts=2", ("telemetry",), "monarch_jupyter.local_jobs.hosts_2__telemetry"),
        ("--local hosts=2 --admin", ("admin",), "monarch_jupyter.local_jobs.hosts_2__admin"),
        (
            "--local a=1,b=2 --admin --telemetry",
            ("telemetry", "admin"),
            "monarch_jupyter.local_jobs.a_1__b_2__telemetry__admin",
        ),
        ("--local hosts=2", (), "monarch_jupyter.local_jobs.hosts_2"),
    ],
)
def test_service_flags_round_trip(line: str, services: tuple[str, ...], path: str) -> None:
    spec = parse_apply(line)
    assert isinstance(spec, LocalSpec)
    assert spec.services == services
    assert spec.path == path
    assert spec_from_saved(spec.path) == spec
    assert parse_apply(spec.describe()) == spec


def test_service_flag_without_local_is_one_line() -> None:
    with pytest.raises(SpecError, match=r"--telemetry goes with --local MESH=N.*enable_telemetry\(\)"):
        parse_apply("mymod.job --telemetry")


@pytest.mark.parametrize("attr", ["hosts_2__admin__telemetry", "hosts_2__telemetry__telemetry"])
def test_saved_services_in_order_once(attr: str) -> None:
    with pytest.raises(AttributeError):
        split_services(attr)


def test_mesh_named_like_a_service_is_still_a_mesh() -> None:
    spec = spec_from_saved("monarch_jupyter.local_jobs.telemetry_2")
    assert spec == LocalSpec((("telemetry", 2),))


NET_TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:A0C5 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0
   1: 00000000:06C1 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1002 1 0
   2: 0100007F:A0C5 0100007F:D2A4 01 00000000:00000000 00:00000000 00000000     0        0 1003 1 0
   3: garbage
"""
NET_TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:2049 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2001 1 0
   1: 00000000000000000000000000000000:2049 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2002 1 0
"""


def test_parse_net_tcp_keeps_listeners_only() -> None:
    assert _procfs.parse_net_tcp(NET_TCP) == {1001: ("127.0.0.1", 41157), 1002: ("0.0.0.0", 1729)}
    assert _procfs.parse_net_tcp(NET_TCP6) == {2001: ("::1", 8265), 2002: ("::", 8265)}


@pytest.mark.parametrize(
    ("addr", "loopback"),
    [
        ("127.0.0.1:0", True),
        ("localhost:1729", True),
        ("[::1]:80", True),
        ("0.0.0.0:1729", False),
        ("myhost:1729", False),
    ],
)
def test_is_loopback(addr: str, loopback: bool) -> None:
    assert is_loopback(addr) is loopback


BANNER_SCRIPT = r"""
import os, sys
from pathlib import Path
from monarch_jupyter import _quiet
from monarch_jupyter.services import banners
log = Path(sys.argv[1])
with _quiet.quietly(log), banners.to_log(log):
    os.write(1, b"Mesh admin server listening on http://localhost:1\n  - Root node:     curl x\n")
    os.write(2, b"real error\n")
    print("Monarch Dashboard: http://localhost:2", flush=True)
    print("user line", flush=True)
with _quiet.quietly():
    os.write(1, b"  - TUI:           dropped without a log\n")
"""


def test_service_banners_go_to_the_log_and_nothing_else(tmp_path) -> None:
    import subprocess
    import sys

    log = tmp_path / "apply.log"
    done = subprocess.run(
        [sys.executable, "-c", BANNER_SCRIPT, str(log)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "user line\n" and done.stderr == "real error\n"
    text = log.read_text()
    assert "Mesh admin server listening on http://localhost:1\n  - Root node:" in text
    assert "Monarch Dashboard: http://localhost:2\n" in text and "user line" not in text
