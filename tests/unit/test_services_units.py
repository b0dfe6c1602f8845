"""Job services: the spec forms, the listening-socket parser, the loopback rule (pure parts)."""

from __future__ import annotations

import pytest

from monarch_jupyter.errors import SpecError
from monarch_jupyter.jobs.services import is_loopback
from monarch_jupyter.jobs.specs.base import LocalSpec
from monarch_jupyter.jobs.specs.local import split_services
from monarch_jupyter.jobs.specs.parse import parse_apply, spec_from_saved
from monarch_jupyter.system import procfs as _procfs


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
from monarch_jupyter.runtime import chatter as _quiet
from monarch_jupyter.jobs.services import banners
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


def test_query_parsing_keeps_the_sql_as_typed() -> None:
    from monarch_jupyter.jobs import args as job_args

    command = job_args.parse("query --pandas SELECT 'a  b' AS \"x\" FROM actors")
    options = command.options
    assert (command.command, options["sql"], options["pandas"], options["tables"]) == (
        "query",
        "SELECT 'a  b' AS \"x\" FROM actors",
        True,
        False,
    )
    assert job_args.parse("query --tables").options["tables"]
    for bad, message in [
        ("query", "give the SQL"),
        ("query --tables SELECT 1", "takes no SQL"),
        ("query --bogus x", "unknown option '--bogus'"),
    ]:
        with pytest.raises(job_args.ArgumentsError, match=message):
            job_args.parse(bad)
    assert "%job query" in job_args.help_text()


def test_table_view_bounds_rows_and_cells_and_keeps_order() -> None:
    import pyarrow as pa

    from monarch_jupyter.jobs.services.table_view import MAX_ROWS, QueryResult, first_line, tables_text

    table = pa.table({"zeta": list(range(120)), "alpha": ["x" * 200] + ["<b>"] * 119})
    view = QueryResult(table, "SELECT", 0.0042)
    text = view.text()
    assert text.splitlines()[0].split() == ["zeta", "alpha"]
    assert len(text.splitlines()) == MAX_ROWS + 3 and text.endswith("(120 rows, first 50 shown · 4.2 ms)")
    assert "x" * 79 + "…" in text and "x" * 81 not in text
    html = view.html()
    assert html.count("<tr>") == MAX_ROWS + 1 and "&lt;b&gt;" in html and "<b>" not in html
    assert "title='int64'" in html
    assert QueryResult(pa.table({"a": [None]}), "", 0.001).text().splitlines()[2] == "NULL"
    assert first_line("\n  first\nsecond") == "first"
    rows = [
        {"table_name": "actors", "column_name": "id", "data_type": "UInt64"},
        {"table_name": "actors", "column_name": "rank", "data_type": "UInt64"},
        {"table_name": "meshes", "column_name": "id", "data_type": "UInt64"},
    ]
    assert tables_text(rows) == "actors: id UInt64, rank UInt64\nmeshes: id UInt64"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("%job query SELECT * FROM ac", ["actors", "actor_nodes"]),
        ("%job query SELECT * FROM ", ["actors", "actor_nodes", "meshes"]),
        ("%job query --t", ["--tables"]),
        ("%job query", []),
        ("%job status ac", []),
        ("%job query SELECT * FROM AC", ["actors", "actor_nodes"]),
    ],
)
def test_query_completion_candidates(line: str, expected: list[str]) -> None:
    from monarch_jupyter.jobs.services.complete import candidates

    assert candidates(line, ["actors", "actor_nodes", "meshes"]) == expected
