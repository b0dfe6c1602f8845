"""The dashboard proxy's path mapping and rewriting (pure; the real server: test_dashboard_proxy)."""

from __future__ import annotations

import json
import os
import socket
import uuid

import pytest

from harness import held_sidecar_lock
from monarch_jupyter._server import dashboard as dash
from monarch_jupyter._server.dashboard_proxy import target_of
from monarch_jupyter.system import procfs as _procfs


@pytest.mark.parametrize(
    ("path", "context_dir", "rest"),
    [
        (".monarch/default", ".monarch/default", ""),
        (".monarch/default/", ".monarch/default", "/"),
        ("nb/.monarch/default/api/summary", "nb/.monarch/default", "/api/summary"),
        ("a/b/.monarch/ctx/static/js/main.js", "a/b/.monarch/ctx", "/static/js/main.js"),
        ("nb/.monarch/x/.monarch/y/", "nb/.monarch/x", "/.monarch/y/"),  # the first .monarch wins
    ],
)
def test_split_path(path: str, context_dir: str, rest: str) -> None:
    assert dash.split_path(path) == dash.Route(context_dir, rest)


@pytest.mark.parametrize(
    "path", ["", "nb/default/", "../.monarch/default/", "nb/.monarch/", "nb/.monarch/..", "a\0/.monarch/x"]
)
def test_split_path_refuses(path: str) -> None:
    with pytest.raises(dash.Refusal) as err:
        dash.split_path(path)
    assert err.value.code == 404 and "\n" not in err.value.message


def _status(**urls: str | None) -> dict:
    return {"state": "running", "urls": {"telemetry": None, "dashboard": None, "admin": None, **urls}}


def test_target_prefers_the_dashboard_then_telemetry() -> None:
    assert dash.target(_status(telemetry="http://127.0.0.1:4100"), "c") == "http://127.0.0.1:4100"
    both = _status(telemetry="http://127.0.0.1:4100", dashboard="http://localhost:8265")
    assert dash.target(both, "c") == "http://127.0.0.1:8265"  # localhost dialled where the sidecar binds
    assert dash.target(_status(dashboard="http://[::1]:9"), "c") == "http://[::1]:9"


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (None, 404),
        (_status(), 404),
        ({"state": "no job"}, 404),
        (_status(telemetry="http://10.0.0.5:4100"), 403),
        (_status(telemetry="http://example.com:80"), 403),
        (_status(telemetry="http://0.0.0.0:4100"), 403),
        (_status(telemetry="https://127.0.0.1:4100"), 502),
        (_status(telemetry="http://user:pw@127.0.0.1:4100"), 502),
        (_status(telemetry="http://127.0.0.1"), 502),
        (_status(telemetry="http://127.0.0.1:notaport"), 502),
        (_status(telemetry="unix:///tmp/sock"), 502),
    ],
)
def test_target_refuses_what_is_not_our_loopback_dashboard(status: dict | None, code: int) -> None:
    with pytest.raises(dash.Refusal) as err:
        dash.target(status, "default")
    assert err.value.code == code and "\n" not in err.value.message
    if code == 404:
        assert "%job apply" in err.value.message


def test_upstream_url_keeps_path_and_query() -> None:
    base = "http://127.0.0.1:4100"
    assert dash.upstream_url(base, "/", "") == "http://127.0.0.1:4100/"
    assert dash.upstream_url(base, "/api/actors/3", "limit=5") == "http://127.0.0.1:4100/api/actors/3?limit=5"
    assert dash.upstream_url(base, "/a b", "") == "http://127.0.0.1:4100/a%20b"
    # the host never comes from the request: an authority-looking path stays a path
    assert dash.upstream_url(base, "//evil.example/x", "").startswith("http://127.0.0.1:4100//evil")


def test_rewrite_html_prefixes_the_page_and_injects_the_shim() -> None:
    page = (
        b'<!DOCTYPE html><html><head><meta charset="utf-8"/>'
        b'<link rel="icon" href="/favicon.svg"/><link rel="stylesheet" href="/static/css/main.css"/>'
        b'</head><body><a href="//cdn.example/x">x</a><a href="rel.html">r</a>'
        b'<script src="/static/js/main.js"></script></body></html>'
    )
    prefix = "/base/monarch-jupyter/dashboard/nb/.monarch/default"
    out = dash.rewrite_html(page, prefix).decode()
    assert f'href="{prefix}/favicon.svg"' in out
    assert f'href="{prefix}/static/css/main.css"' in out
    assert f'src="{prefix}/static/js/main.js"' in out
    assert 'href="//cdn.example/x"' in out and 'href="rel.html"' in out
    head = out.index("<head>") + len("<head>")
    assert out[head:].startswith("<script>") and json.dumps(prefix) in out
    assert out.index("<script>") < out.index(prefix + "/static/js/main.js")


def test_rewrite_html_without_head_still_gets_the_shim() -> None:
    assert dash.rewrite_html(b"<p>hi</p>", "/p").startswith(b"<script>")


def test_rewrite_location_stays_under_the_prefix() -> None:
    base, prefix = "http://127.0.0.1:4100", "/monarch-jupyter/dashboard/.monarch/default"
    assert dash.rewrite_location("http://127.0.0.1:4100/api/x", base, prefix) == prefix + "/api/x"
    assert dash.rewrite_location("/login", base, prefix) == prefix + "/login"
    assert dash.rewrite_location("http://evil.example/", base, prefix) == prefix + "/"
    assert dash.rewrite_location("//evil.example/", base, prefix) == prefix + "/"


def test_error_page_escapes() -> None:
    page = dash.error_page("context '<x>' has no dashboard")
    assert "&lt;x&gt;" in page and "<x>" not in page


def test_target_of_reads_only_context_folders_under_the_root(tmp_path) -> None:
    ctx = tmp_path / "nb" / ".monarch" / "default"
    ctx.mkdir(parents=True)
    apply_id = f"unit{uuid.uuid4().hex}"
    with socket.socket() as ours, held_sidecar_lock(apply_id):  # held by the job's sidecar (us)
        ours.bind(("127.0.0.1", 0))
        ours.listen(1)
        url = f"http://127.0.0.1:{ours.getsockname()[1]}"
        (ctx / "status.json").write_text(json.dumps({**_status(telemetry=url), "apply_id": apply_id}))
        assert target_of(str(tmp_path), "nb/.monarch/default") == url
        # #42: a port of ours that is not the job's sidecar's (another job id, no sidecar)
        (ctx / "status.json").write_text(json.dumps({**_status(telemetry=url), "apply_id": "other"}))
        with pytest.raises(dash.Refusal) as err:
            target_of(str(tmp_path), "nb/.monarch/default")
        assert err.value.code == 403 and "not the job's sidecar" in err.value.message
        (ctx / "status.json").write_text(json.dumps({**_status(telemetry=url), "apply_id": apply_id}))
        (ctx / "status.json").chmod(0o666)  # writable by others: not trusted
        with pytest.raises(dash.Refusal) as err:
            target_of(str(tmp_path), "nb/.monarch/default")
        assert err.value.code == 403 and "writable by group/others" in err.value.message
        (ctx / "status.json").chmod(0o600)
    with pytest.raises(dash.Refusal) as err:  # closed: nothing listens there any more
        target_of(str(tmp_path), "nb/.monarch/default")
    assert err.value.code == 502 and "nothing listens" in err.value.message
    (tmp_path / "nb" / "notctx").mkdir()
    for bad in ("nb/.monarch/missing", "nb/notctx", "../x/.monarch/default"):
        with pytest.raises(dash.Refusal) as err:
            target_of(str(tmp_path), bad)
        assert err.value.code == 404
    outside = tmp_path.parent / f"{tmp_path.name}-outside" / ".monarch" / "default"
    outside.mkdir(parents=True)
    (tmp_path / "nb" / ".monarch" / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(dash.Refusal):  # a symlink out of the root is not followed there
        target_of(str(tmp_path), "nb/.monarch/link")


# the header and two LISTEN lines (st 0A) of /proc/net/tcp, one ESTABLISHED (01); uid is field 7
NET_TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1004 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 111 1
   1: 0100007F:1005 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 112 1
   2: 0100007F:1004 0100007F:D431 01 00000000:00000000 00:00000000 00000000  2000        0 113 1
"""


def test_parse_listen_owners() -> None:
    assert _procfs.parse_listen_owners(NET_TCP, 0x1004) == {1000}  # the connected socket is no listener
    assert _procfs.parse_listen_owners(NET_TCP, 0x1005) == {0}
    assert _procfs.parse_listen_owners(NET_TCP, 1) == set()
    assert _procfs.parse_listen_owners("garbage\n a b c", 1) == set()


def test_check_owner() -> None:
    dash.check_owner({1000}, 1000, "http://127.0.0.1:1")
    for owners, code in (({1001}, 403), ({1000, 1001}, 403), (set(), 502), (None, 503)):
        with pytest.raises(dash.Refusal) as err:
            dash.check_owner(owners, 1000, "http://127.0.0.1:1")
        assert err.value.code == code and "\n" not in err.value.message


def test_listen_owners_sees_our_listener() -> None:
    with socket.socket() as ours:
        ours.bind(("127.0.0.1", 0))
        ours.listen(1)
        assert _procfs.listen_owners(ours.getsockname()[1]) == {os.getuid()}
