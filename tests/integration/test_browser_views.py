"""Our views under load and for the keyboard, in a real JupyterLab in Debian's Chromium.

A saved notebook with a 100,000-rank ``%%remote`` result opens with a bounded
DOM (the renderer draws one page of ranks, failing first). Timings are printed
for benchmarks/README.md, never asserted; only bounds that cannot flake are.
The server serves this checkout's build (``browser_util.jupyter_path``):
``cd labextension && jlpm build:prod`` first.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_util import (
    LAB,
    NEEDS_BUILD,
    NEEDS_CHROMIUM,
    REPO,
    JupyterServer,
    chromium_page,
    code_cell,
    jupyter_server,
    notebook,
    run_cell,
    wait_kernel_idle,
    wait_prompt,
)

pytestmark = [
    NEEDS_CHROMIUM,
    NEEDS_BUILD,
    pytest.mark.timeout(240),
    pytest.mark.browser,
]

RUN_MIME = "application/vnd.monarch.remote+json"
RANKS = 100_000
MAX_OUTPUT_NODES = 3000  # one page of 100 ranks is ~600 nodes; 100,000 drawn was ~700,000


def big_result(ranks: int = RANKS, failing_every: int = 1000) -> dict:
    """A version-2 payload of ``ranks`` ranks, one failing every ``failing_every``."""

    def rank(i: int) -> dict:
        failing = i % failing_every == failing_every - 1
        return {
            "label": f"hosts={i}",
            "mesh": "hosts",
            "point": {"hosts": i},
            "rank": i,
            "status": "failed" if failing else "ok",
            "returncode": 1 if failing else 0,
            "duration": 1e308 if i == 0 else 0.5,
            "lines": [["out", f"hello from {i} " + "x" * 100], ["err", "warning"]],
            "truncated": 0,
        }

    failed = ranks // failing_every
    return {
        "version": 2,
        "command": "echo hello",
        "mode": "bash",
        "target": f"hosts ({ranks} ranks)",
        "started": "2026-11-30T15:00:00Z",
        "duration": 1.5,
        "log_path": None,
        "summary": {"ok": ranks - failed, "failed": failed},
        "ranks": [rank(i) for i in range(ranks)],
        "run_id": "big",
        "state": "finished",
    }


def saved(outputs: list[dict]) -> dict:
    """A ``%%remote`` cell as saved: executed once, with ``outputs``."""
    return code_cell("%%remote\necho hello", outputs, execution_count=1)


@contextlib.contextmanager
def lab_page(
    tmp_path: Path, tag: str, files: dict[str, dict], extra: tuple[str, ...] = ()
) -> Iterator[tuple[JupyterServer, object]]:
    """A JupyterLab server over ``files`` (name -> notebook) and a Chromium page on it."""
    root = tmp_path / "root"
    root.mkdir()
    for name, content in files.items():
        (root / name).write_text(json.dumps(content))
    # every cell in the DOM, drawn: axe skips what content-visibility (Lab's default) leaves out
    settings = (
        tmp_path / "jupyter" / "config" / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
    )
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    try:
        with (
            jupyter_server(root, tmp_path / "jupyter", tag, LAB, extra) as server,
            chromium_page(tag, 120_000) as page,
        ):
            yield server, page
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_huge_saved_result_renders_bounded(tmp_path: Path, tag: str) -> None:
    output = {
        "output_type": "display_data",
        "metadata": {},
        "data": {RUN_MIME: big_result(), "text/plain": "remote: 99900 ok, 100 failed"},
    }
    name = "big.ipynb"
    with lab_page(tmp_path, tag, {name: notebook([saved([output])])}) as (server, page):
        size = (server.root / name).stat().st_size
        start = time.monotonic()
        page.goto(f"{server.url}/lab/tree/{name}?token={server.token}")
        page.wait_for_selector(".jp-MonarchRun-rank")
        opened = time.monotonic() - start
        out = page.locator(".jp-MonarchRun").first
        nodes = out.evaluate("n => n.querySelectorAll('*').length")
        ranks = out.locator(".jp-MonarchRun-rank").count()
        first = out.locator(".jp-MonarchRun-rank").first.inner_text()
        more = out.locator(".jp-MonarchRun-more").inner_text()
        text = out.inner_text()
        start = time.monotonic()
        out.locator(".jp-MonarchRun-filter input").check()
        page.wait_for_function("() => document.querySelector('.jp-MonarchRun-more').hidden")
        failing = time.monotonic() - start
        failing_nodes = out.evaluate("n => n.querySelectorAll('*').length")
        print(
            f"\n100,000-rank payload ({size / 1e6:.1f} MB): open {opened:.1f} s to the first ranks, "
            f"{nodes} DOM nodes; 'failing only' {failing:.2f} s, {failing_nodes} nodes"
        )
    assert ranks == 100, ranks
    assert "hosts=999" in first and "rc=1" in first, first  # failing ranks come first
    assert "9,900 not shown" in more, more  # 10,000 ranks read; the rest are named, not drawn
    assert "90,000 more ranks not read" in text, text[-300:]
    assert nodes <= MAX_OUTPUT_NODES, nodes
    assert failing_nodes <= MAX_OUTPUT_NODES, failing_nodes


AXE = REPO / "labextension" / "node_modules" / "axe-core" / "axe.min.js"
OURS = [".monarch-run-widget", ".jp-MonarchRun", ".jp-MonarchPanel", ".monarch-job-widget"]
AXE_RUN = """async selectors => {
  const include = selectors.filter(s => document.querySelector(s)).map(s => [s]);
  const result = await axe.run({ include }, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa'] } });
  const contrast = rule => (rule.find(r => r.id === 'color-contrast') || { nodes: [] }).nodes.length;
  console.log(`axe: ${include.length} regions, color-contrast passed on ${contrast(result.passes)} nodes, ` +
    `undecided on ${contrast(result.incomplete)}; ${result.passes.length} rules passed`);
  return result.violations.map(v => `${v.id} (${v.help}): ` +
    v.nodes.slice(0, 4).map(n => `${n.target.join(' ')} ${n.failureSummary.replace(/\\s+/g, ' ')}`).join(' | '));
}"""
# WCAG 2 contrast of every text node in our views against its effective background (axe's own
# color-contrast rule reports itself inapplicable inside JupyterLab's output areas).
CONTRAST = """selectors => {
  // rgb(…)/rgba(…) in 0–255, or color(srgb r g b / a) in 0–1 (what color-mix computes to);
  // the alpha, if any, last
  const rgb = c => {
    const v = (c.match(/[\\d.]+/g) || []).map(Number);
    return c.startsWith('color(') ? [...v.slice(0, 3).map(x => x * 255), ...v.slice(3)] : v;
  };
  // a translucent text colour is seen blended over its background
  const over = (fg, bg) => fg.length === 4 ? fg.slice(0, 3).map((c, i) => c * fg[3] + bg[i] * (1 - fg[3])) : fg.slice(0, 3);
  const lum = ([r, g, b]) => {
    const f = v => (v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = node => {
    for (let n = node; n; n = n.parentElement) {
      const c = rgb(getComputedStyle(n).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const low = [];
  for (const root of selectors.flatMap(s => Array.from(document.querySelectorAll(s)))) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let t = walker.nextNode(); t; t = walker.nextNode()) {
      const el = t.parentElement;
      if (!t.textContent.trim() || !el.getClientRects().length) continue;
      const style = getComputedStyle(el);
      if (style.visibility === 'hidden' || Number(style.opacity) < 0.1) continue;
      if (el.closest('button:disabled, input:disabled')) continue;  // WCAG exempts disabled controls
      const back = background(el);
      const fg = lum(over(rgb(style.color), back)), bg = lum(back);
      const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
      const large = parseFloat(style.fontSize) >= 24 || (parseFloat(style.fontSize) >= 18.66 && Number(style.fontWeight) >= 700);
      if (ratio < (large ? 3 : 4.5)) low.push(`${el.className || el.tagName} '${t.textContent.trim().slice(0, 30)}' ${ratio.toFixed(2)}:1 (${style.color} on ${back})`);
    }
  }
  return [...new Set(low)];
}"""
# detached and long: its grid stays on screen while the test looks (its result replaces it when
# the run ends; the last cell's %job kill stops it)
COLOUR_CELL = """%%remote --detach
printf '\\033[31mred\\033[0m plain\\n'; echo oops >&2; sleep 60"""


def _theme(page, name: str, light: bool) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
    page.locator(".lm-Menu-itemLabel", has_text=name).first.click()
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{str(light).lower()}'")
    time.sleep(0.5)  # the theme's CSS variables apply


@pytest.mark.skipif(not AXE.is_file(), reason="no axe-core: cd labextension && jlpm install")
def test_keyboard_and_axe_in_light_and_dark(tmp_path: Path, tag: str) -> None:
    output = {
        "output_type": "display_data",
        "metadata": {},
        "data": {RUN_MIME: big_result(ranks=3, failing_every=2), "text/plain": "remote"},
    }
    cells = ["%load_ext monarch_jupyter", "%job apply --local hosts=2", "%job", COLOUR_CELL, "%job kill"]
    nb = notebook([saved([output]), *cells])
    name = "a11y.ipynb"
    with lab_page(tmp_path, tag, {name: nb}) as (server, page):
        page.goto(f"{server.url}/lab/tree/{name}?token={server.token}")
        page.wait_for_selector(".jp-MonarchRun-rank")
        wait_kernel_idle(server, page, name)
        for index in range(1, 5):
            run_cell(page, index)
        grid = page.locator(".monarch-run-widget").first
        grid.locator(".monarch-run-tile").nth(1).wait_for()

        # keyboard: a tile and a sidebar context, focused and activated without the mouse
        tile = grid.locator(".monarch-run-tile").nth(1)
        tile.focus()
        page.keyboard.press("Enter")
        output = grid.locator(".monarch-run-output")
        output.wait_for()
        assert output.locator(".ansi-red-fg").first.inner_text() == "red"
        assert "[31m" not in output.inner_text()
        server.ui.open_sidebar(page)
        head = page.locator(".jp-MonarchPanel-itemHead").first
        head.wait_for()
        head.focus()
        page.keyboard.press(" ")
        page.locator(".jp-MonarchPanel-detailsTitle").wait_for()
        assert page.locator(".jp-MonarchPanel-itemHead").first.get_attribute("aria-expanded") == "true"

        page.on("console", lambda m: print(m.text) if m.text.startswith("axe:") else None)
        page.add_script_tag(path=str(AXE))
        found = {}
        for theme, light in (("JupyterLab Light", True), ("JupyterLab Dark", False)):
            _theme(page, theme, light)
            found[theme] = page.evaluate(AXE_RUN, OURS) + page.evaluate(CONTRAST, OURS)
        run_cell(page, 5)  # %job kill
    assert found == {"JupyterLab Light": [], "JupyterLab Dark": []}, json.dumps(found, indent=1)


def test_grid_loads_from_the_kernel_without_the_server_extension(tmp_path: Path, tag: str) -> None:
    """No /monarch-jupyter/static/ (the server extension off, as in VS Code): the saved loader
    asks the kernel for the grid's code, which it answers while the cell still runs; when the
    run ends its result takes the grid's place."""
    cells = [
        "%load_ext monarch_jupyter",
        "%job apply --local hosts=2",
        "%%remote\necho hi; sleep 6",
        "%job kill",
    ]
    nb = notebook(cells)
    name = "fallback.ipynb"
    off = '--ServerApp.jpserver_extensions={"monarch_jupyter._server": False}'
    with lab_page(tmp_path, tag, {name: nb}, (off,)) as (server, page):
        page.goto(f"{server.url}/lab/tree/{name}?token={server.token}")
        page.wait_for_selector(".jp-Notebook .jp-Cell")
        wait_kernel_idle(server, page, name)
        status = page.evaluate(
            "async () => (await fetch('/monarch-jupyter/static/run.js', {credentials: 'same-origin'})).status"
        )
        for index in range(2):
            run_cell(page, index)
        run_cell(page, 2, wait=False)
        cell = page.locator(".jp-Notebook .jp-Cell").nth(2)
        grid = cell.locator(".monarch-run-widget")
        grid.locator(".monarch-run-tile").nth(1).wait_for(timeout=30_000)
        tiles = grid.locator(".monarch-run-tile").count()
        prompt_then = cell.locator(".jp-InputArea-prompt").inner_text().strip()
        wait_prompt(cell, 2, 60)
        cell.locator(".jp-MonarchRun").wait_for(timeout=10_000)
        after = {
            "grids": grid.count(),
            "results": cell.locator(".jp-MonarchRun").count(),
            "outputs": cell.locator(".jp-OutputArea-child").count(),
        }
        run_cell(page, 3)
    assert status == 404, status
    assert tiles == 2 and prompt_then == "[*]:", (tiles, prompt_then)  # live, while the cell ran
    assert after == {"grids": 0, "results": 1, "outputs": 1}, after
