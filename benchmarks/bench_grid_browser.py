"""The live grid of N simulated ranks in real Chromium: long frames, DOM nodes,
whether the notebook still scrolls.

    .venv/bin/python benchmarks/bench_grid_browser.py [--ranks 1024 4096] [--ui lab|notebook]
                                                      [--seconds 12] [--same] [--fail-every 512] [--json]

A real Jupyter server (``tests/browser_util.py``) and Debian's Chromium open a notebook whose
kernel loads the extension and puts ``_scale_driver``'s simulated fleet under ``%%remote`` (the
real kernel path from the wire messages on, as ``bench_scale.py``); each of N ranks prints
``--rate`` lines/s (``--same``: every rank the same lines, so they fold into one group; without
it every rank's lines differ, so the grid pages its tiles; ``--select``: the first tile is
clicked 2 s in, so its output pane follows the run too), and every ``--fail-every``-th rank
fails half-way. While the cell runs the page records:

- long tasks (``PerformanceObserver`` ``longtask``: main-thread tasks over 50 ms) and the gaps
  between animation frames (``requestAnimationFrame``): the frames over 50 ms;
- the DOM nodes of the page and of the grid, each second;
- the notebook's scrolling: a wheel turn over it and how long until it has scrolled.

One line (``--json``: one JSON object) per N with at least ``ranks``, ``longtasks``,
``longtask_max_ms``, ``frames_over_50ms``, ``frame_gap_max_ms``, ``dom_nodes_max``,
``grid_nodes_max``, ``tiles_max``, ``scroll_ms``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from browser_util import (  # noqa: E402  # noqa: E402
    LAB,
    NOTEBOOK,
    chromium_page,
    jupyter_server,
    wait_kernel_idle,
)
from browser_util import notebook as ipynb  # noqa: E402
from harness import new_tag, reap  # noqa: E402

FILE = "grid_bench.ipynb"

# Installed in the page before the cell runs: long tasks, frame gaps.
PROBE = """() => {
  const b = (window.__gridBench = { longtasks: [], gaps: [], frames: 0, on: true });
  try {
    new PerformanceObserver(list => {
      for (const e of list.getEntries()) b.longtasks.push([e.startTime, e.duration]);
    }).observe({ type: 'longtask', buffered: false });
  } catch (e) { b.noLongtask = String(e); }
  // long animation frames: how much of each went to scripts, to style and layout, to the rest
  b.loaf = [];
  try {
    new PerformanceObserver(list => {
      for (const e of list.getEntries()) {
        const end = e.startTime + e.duration;
        const scripts = e.scripts.map(x => [x.duration, (x.invoker || '').slice(0, 60)]);
        b.loaf.push([e.startTime, e.duration, e.styleAndLayoutStart ? end - e.styleAndLayoutStart : 0,
          e.renderStart ? end - e.renderStart : 0, scripts]);
      }
    }).observe({ type: 'long-animation-frame', buffered: false });
  } catch (e) { b.noLoaf = String(e); }
  let last = performance.now();
  const tick = now => {
    if (!b.on) return;
    b.frames += 1;
    if (now - last > 50) b.gaps.push([last, now - last]);
    last = now;
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}"""

COUNT = """() => {
  const grid = document.querySelector('.monarch-run-widget');
  return {
    dom: document.getElementsByTagName('*').length,
    cell: (grid && grid.closest('.jp-Cell') ? grid.closest('.jp-Cell').getElementsByTagName('*').length : 0),
    grid: grid ? grid.getElementsByTagName('*').length : 0,
    tiles: grid ? grid.querySelectorAll('.monarch-run-tile').length : 0,
    groups: grid ? grid.querySelectorAll('.monarch-run-group').length : 0,
    first: grid ? (grid.querySelector('.monarch-run-tile .monarch-run-label') || {}).textContent || '' : '',
    // the run's cell outputs: which one holds the nodes (the grid, the text, the running payload)
    outputs: grid && grid.closest('.jp-Cell')
      ? [...grid.closest('.jp-Cell').querySelectorAll('.jp-OutputArea-output')].map(o => [
          (o.firstElementChild && o.firstElementChild.className.split(' ')[0]) || o.className.split(' ')[0],
          o.getElementsByTagName('*').length,
        ])
      : [],
  };
}"""

# The grid's scrolling ancestor (the notebook's own scroller), scrolled by a wheel turn.
SCROLLER = """() => {
  let node = document.querySelector('.monarch-run-widget');
  while (node && node !== document.body) {
    const style = getComputedStyle(node);
    if (/(auto|scroll)/.test(style.overflowY) && node.scrollHeight > node.clientHeight) {
      node.dataset.benchScroller = '1';
      return { top: node.scrollTop, height: node.scrollHeight, view: node.clientHeight };
    }
    node = node.parentElement;
  }
  return null;
}"""


def notebook(folder: Path) -> dict[str, Any]:
    cells = [
        f"import sys; sys.path.insert(0, {str(HERE)!r}); import _scale_driver",
        "%load_ext monarch_jupyter",
        f"_scale_driver.install(get_ipython(), {str(folder)!r})",
        "SETTINGS",
        "%%remote bash --no-raise\nsimulated",
        *[f"# a cell below the grid, {i}: the notebook must still scroll to it" for i in range(12)],
    ]
    return ipynb(cells)


def run_cell(page, index: int, source: str | None = None, wait: float = 120) -> None:
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    cell.scroll_into_view_if_needed()
    cell.locator(".jp-InputArea-editor").click()
    if source is not None:
        page.keyboard.press("Control+A")
        page.keyboard.insert_text(source)
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Enter")
    if wait:
        prompt = cell.locator(".jp-InputArea-prompt")
        deadline = time.monotonic() + wait
        while not (prompt.inner_text() or "").strip().rstrip(":").strip("[]").isdigit():
            if time.monotonic() > deadline:
                raise TimeoutError(f"cell {index} did not finish")
            time.sleep(0.1)


def scroll_ms(page) -> float | None:
    """A wheel turn over the notebook: ms until its scroller moved (None: it did not in 2 s)."""
    if page.evaluate(SCROLLER) is None:
        return None
    box = page.locator("[data-bench-scroller]").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    before = page.evaluate("() => document.querySelector('[data-bench-scroller]').scrollTop")
    direction = -300 if before > 300 else 300
    start = time.monotonic()
    page.mouse.wheel(0, direction)
    while time.monotonic() - start < 2:
        if page.evaluate("() => document.querySelector('[data-bench-scroller]').scrollTop") != before:
            return round(1000 * (time.monotonic() - start), 1)
        time.sleep(0.01)
    return None


def print_profile(profile: dict[str, Any], top: int = 25) -> dict[str, float]:
    """The functions with the most self time (samples), with their script (stderr); returns the
    page's busy CPU and the part spent in the grid's code (run.js, callees included), in ms."""
    nodes = {n["id"]: n for n in profile["nodes"]}
    parent = {child: n["id"] for n in profile["nodes"] for child in n.get("children", [])}
    hits: dict[int, int] = {}
    for sample in profile.get("samples", []):
        hits[sample] = hits.get(sample, 0) + 1
    interval = (profile["endTime"] - profile["startTime"]) / 1000 / max(1, len(profile.get("samples", [])))
    busy = grid = 0
    for node_id, count in hits.items():
        if nodes[node_id]["callFrame"]["functionName"] in ("(idle)", "(program)"):
            continue
        busy += count
        at: int | None = node_id
        while at is not None:
            if "run.js" in nodes[at]["callFrame"]["url"]:
                grid += count
                break
            at = parent.get(at)
    total = max(1, sum(hits.values()))
    by_fn: dict[str, int] = {}
    for node_id, count in hits.items():
        frame = nodes[node_id]["callFrame"]
        key = f"{frame['functionName'] or '(anon)'} {frame['url'].rsplit('/', 1)[-1][:40]}:{frame['lineNumber']}"
        by_fn[key] = by_fn.get(key, 0) + count
    for key, count in sorted(by_fn.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{100 * count / total:5.1f}%  {key}", file=sys.stderr)
    program = sum(c for i, c in hits.items() if nodes[i]["callFrame"]["functionName"] == "(program)")
    return {
        "js_busy_ms": round(busy * interval, 1),
        "program_ms": round(program * interval, 1),  # the browser's own work (style, layout, paint…)
        "grid_js_ms": round(grid * interval, 1),
    }


def measure(page, ranks: int, options: argparse.Namespace) -> dict[str, Any]:
    settings = dict(
        ranks=ranks,
        seconds=options.seconds,
        rate=options.rate,
        same=options.same,
        fail_every=options.fail_every,
    )
    run_cell(page, 3, f"_scale_driver.SETTINGS.update({settings!r})")
    page.evaluate(PROBE)
    cdp = None
    if options.profile:  # the page's CPU profile while the cell runs: where the long tasks go
        cdp = page.context.new_cdp_session(page)
        cdp.send("Profiler.enable")
        cdp.send("Profiler.start")
    browser = page.context.browser if options.trace else None
    if browser is not None:  # Chromium's own timeline: which style, layout and paint work, how big
        categories = ["devtools.timeline", "disabled-by-default-devtools.timeline", "blink", "v8"]
        browser.start_tracing(page=page, path=options.trace, categories=categories)
    flags = "--no-raise" + (" --quiet" if options.quiet else "")
    run_cell(page, 4, f"%%remote bash {flags}\nsimulated", wait=0)
    counts: list[dict[str, Any]] = []
    began = page.evaluate("() => performance.now()")
    ended = float("inf")
    scrolls: list[float | None] = []
    selected = False  # --select: the first tile clicked
    start = time.monotonic()
    prompt = page.locator(".jp-Notebook .jp-Cell").nth(4).locator(".jp-InputArea-prompt")
    while time.monotonic() - start < options.seconds + 120:
        time.sleep(1.0)
        if ended == float("inf"):
            counts.append(page.evaluate(COUNT))
        if options.select and not selected and time.monotonic() - start > 2:
            tile = page.locator(".monarch-run-grid .monarch-run-tile").first
            if tile.count():
                tile.click()
                selected = True
        if 3 < time.monotonic() - start < options.seconds - 1 and len(scrolls) < 3:
            scrolls.append(scroll_ms(page))
        if (prompt.inner_text() or "").strip().rstrip(":").strip("[]").isdigit():
            ended = page.evaluate("() => performance.now()")  # the run's end: the final result follows
            break
    time.sleep(3.0)  # the final result's render
    final = page.evaluate(COUNT)
    bench = page.evaluate("() => { window.__gridBench.on = false; return window.__gridBench; }")
    cpu = print_profile(cdp.send("Profiler.stop")["profile"]) if cdp is not None else {}
    if browser is not None:
        browser.stop_tracing()
    # while the run streams (the live grid) vs the final result's render after it
    longtasks = [d for t, d in bench["longtasks"] if began <= t < ended]
    gaps = [d for t, d in bench["gaps"] if began <= t < ended]
    after = [d for t, d in bench["longtasks"] if t >= ended]
    moved = [s for s in scrolls if s is not None]
    loaf = [f for f in bench.get("loaf", []) if began <= f[0] < ended]
    invokers: dict[str, float] = {}
    for frame in loaf:
        for ms, invoker in frame[4]:
            invokers[invoker] = invokers.get(invoker, 0.0) + ms
    return {
        "ranks": ranks,
        "ui": options.ui,
        "selected": selected,
        "case": ("same lines" if options.same else "distinct lines")
        + f", {options.rate:g} lines/s/rank"
        + (", --quiet" if options.quiet else ""),
        "longtasks": len(longtasks),
        "longtask_max_ms": round(max(longtasks, default=0.0), 1),
        "longtask_total_ms": round(sum(longtasks), 1),
        "frames": bench["frames"],
        "frames_over_50ms": len(gaps),
        "frame_gap_max_ms": round(max(gaps, default=0.0), 1),
        # when in the run each long frame fell: [seconds after execute, its length in ms]
        "frames_over_50ms_at": [
            [round((t - began) / 1000, 2), round(d)] for t, d in bench["gaps"] if began <= t < ended
        ],
        "final_longtask_max_ms": round(max(after, default=0.0), 1),
        "dom_nodes_max": max(c["dom"] for c in counts),
        "dom_nodes_final": final["dom"],
        "grid_nodes_max": max(c["grid"] for c in counts),
        "cell_nodes_max": max(c["cell"] for c in counts),  # the run's cell: input, text, grid
        "cell_nodes_final": final["cell"],
        "cell_outputs_running": counts[-1]["outputs"] if counts else [],
        "cell_outputs_final": final["outputs"],
        "tiles_max": max(c["tiles"] for c in counts),
        "groups_max": max(c["groups"] for c in counts),
        "first_tile": counts[-1]["first"] if counts else "",
        "scroll_ms": round(statistics.median(moved), 1) if moved else None,
        "scrolls_moved": f"{len(moved)}/{len(scrolls)}",
        "longtask_api": bench.get("noLongtask", "ok"),
        # the long animation frames while it streams: their time in all, in scripts, in style and
        # layout (from styleAndLayoutStart), and the scripts' callers that took the most
        "loaf": len(loaf),
        "loaf_ms": round(sum(f[1] for f in loaf)),
        "loaf_script_ms": round(sum(ms for f in loaf for ms, _ in f[4])),
        "loaf_style_layout_ms": round(sum(f[2] for f in loaf)),
        "loaf_top_scripts": [[k, round(v)] for k, v in sorted(invokers.items(), key=lambda kv: -kv[1])[:5]],
        **cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--ui", choices=("lab", "notebook"), default="lab")
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--same", action="store_true", help="every rank prints the same lines")
    parser.add_argument("--fail-every", type=int, default=512, help="every K-th rank fails half-way")
    parser.add_argument(
        "--quiet", action="store_true", help="%%%%remote --quiet: the grid without the streamed text"
    )
    parser.add_argument(
        "--select", action="store_true", help="click the first tile 2 s in: its output pane follows"
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--trace", help="write Chromium's timeline trace (JSON) of the run here")
    parser.add_argument("--profile", action="store_true", help="the page's CPU profile (stderr)")
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-grid-"))
    tag = new_tag()
    try:
        for ranks in options.ranks:  # a fresh server, kernel and page per N
            root = folder / f"n{ranks}"
            root.mkdir()
            (root / FILE).write_text(json.dumps(notebook(root)))
            ui = LAB if options.ui == "lab" else NOTEBOOK
            with (
                jupyter_server(root, root / "jupyter", tag, ui) as server,
                chromium_page(tag, 60_000) as page,
            ):
                page.goto(f"{server.url}{server.ui.notebook_url(FILE)}?token={server.token}")
                page.wait_for_selector(".jp-Notebook .jp-Cell")
                wait_kernel_idle(server, page, FILE)
                for index in range(3):
                    run_cell(page, index)
                row = measure(page, ranks, options)
            print(
                json.dumps(row) if options.json else "  ".join(f"{k}={v}" for k, v in row.items()), flush=True
            )
    finally:
        reap(tag)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
