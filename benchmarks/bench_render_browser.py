"""The saved-result renderer at 1,024 and 4,096 ranks in Chromium.

    .venv/bin/python benchmarks/bench_render_browser.py [--ranks 1024 4096] [--case agree distinct]
                                                        [--seconds 10] [--repeat 1] [--json]

Each payload is made by the real kernel code: a ``RunState`` fed the events of a run (each rank
printing ``--seconds`` × 10 lines, as ``bench_scale.py``'s ranks do), its ``mime_bundle()`` saved
in a notebook between markdown cells. ``agree``: every rank prints the same lines but one in 512,
which fails with a traceback; ``distinct``: every rank's lines differ (``_scale_driver.line``: its
rank and loss), so the diff view has one group per rank. A real JupyterLab (``tests/browser_util``,
this checkout's build: ``cd labextension && jlpm build:prod``) in Debian's Chromium, headless, with
the app exposed (``expose_app_in_browser``) so the notebook is opened by command once Lab is up.

Per phase, from the page (``PerformanceObserver('longtask')`` and ``requestAnimationFrame``
gaps): the longest frame, the long tasks (> 50 ms) and the renderer's DOM nodes.
Phases: ``open`` (docmanager:open to the ranks drawn, then 1 s; JupyterLab's own notebook
opening included: ``--baseline`` measures it on a 2-rank payload), ``render`` (the same output
rendered once more, alone in one task: the renderer's share of open), ``paste`` (the cell copied
and pasted: a new output rendered with the notebook open), ``failing`` / ``all`` ("failing only"
on, off), ``diff`` / ``diff+failing`` / ``diff off``, ``scroll`` (the notebook wheeled down
and up: its scrollTop must move). Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from _scale_driver import line  # noqa: E402

from browser_util import (  # noqa: E402
    BUILT,
    LAB,
    chromium,
    code_cell,
    jupyter_server,
    new_page,
)
from browser_util import notebook as ipynb  # noqa: E402
from harness import new_tag, reap  # noqa: E402
from monarch_jupyter.remote.view.model import (  # noqa: E402
    ERR,
    OUT,
    Exited,
    Finished,
    Output,
    RankState,
    RunState,
    Started,
)

RATE = 10  # lines per second per rank, as bench_scale.py
OUTLIER_EVERY = 512

# Installed before any page script: long tasks and frame gaps since the last reset.
PERF_JS = """
window.__perf = { tasks: [], frames: [], since: 0 };
new PerformanceObserver(list => {
  for (const e of list.getEntries()) window.__perf.tasks.push([e.startTime, e.duration]);
}).observe({ type: 'longtask', buffered: true });
let last = performance.now();
const tick = t => { window.__perf.frames.push([last, t - last]); last = t; requestAnimationFrame(tick); };
requestAnimationFrame(tick);
"""
RESET_JS = "() => { window.__perf.since = performance.now(); }"
READ_JS = """() => {
  const p = window.__perf, since = p.since;
  const tasks = p.tasks.filter(([s]) => s >= since).map(([, d]) => d);
  const frames = p.frames.filter(([s]) => s >= since).map(([, d]) => d);
  const out = document.querySelectorAll('.jp-MonarchRun');
  const nodes = Array.from(out).reduce((n, o) => n + o.querySelectorAll('*').length, 0);
  return { longest_frame_ms: Math.max(0, ...frames), frames: frames.length,
           frames_over_50ms: frames.filter(d => d > 50).length,
           long_tasks: tasks.length, longest_task_ms: Math.max(0, ...tasks),
           renderer_nodes: nodes, document_nodes: document.querySelectorAll('*').length };
}"""
# The saved output rendered once more by the notebook's own rendermime, alone in one task
# (parse, draw, layout): the renderer's share of "open".
RENDER_JS = """() => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  const cell = nb.widgets.find(c => c.node.querySelector('.jp-MonarchRun'));
  const data = cell.model.outputs.get(0).data;
  const mime = 'application/vnd.monarch.remote+json';
  const renderer = nb.rendermime.createRenderer(mime);
  renderer.renderModel(nb.rendermime.createModel({ data }));
  const host = cell.node.querySelector('.jp-OutputArea-output');
  host.appendChild(renderer.node);
  const height = renderer.node.offsetHeight;
  renderer.node.remove();
  return height;
}"""
SCROLLER_JS = """() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer')
    || document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  return panel ? panel.scrollTop : -1;
}"""


def run_state(ranks: int, seconds: float, case: str) -> RunState:
    """A finished run of ``ranks`` ranks fed through the real model, as a real run feeds it."""
    states = [RankState(label=f"hosts={i}", mesh="hosts", point={"hosts": i}, rank=i) for i in range(ranks)]
    state = RunState(
        "python train.py", "bash", f"mesh hosts ({ranks} ranks)", states, started=time.time() - seconds
    )
    count = int(seconds * RATE)
    for i in range(ranks):
        state.apply(Started(i, 1000 + i))
        outlier = case == "agree" and i % OUTLIER_EVERY == OUTLIER_EVERY - 1
        for second in range(int(seconds)):  # one message per second of output
            lines = range(second * RATE, min(count, (second + 1) * RATE))
            if case == "agree":
                text = "".join(f"step {k:6d} loss 0.{k % 97:04d} lr 3.0e-4\n" for k in lines)
            else:
                text = "".join(line(i, k) for k in lines)
            state.apply(Output(i, OUT, text, len(lines)))
        if outlier:
            trace = 'Traceback (most recent call last):\n  File "train.py", line 88, in step\n'
            state.apply(Output(i, ERR, trace + "FloatingPointError: loss is nan\n"))
        state.apply(Exited(i, 1 if outlier else 0, seconds))
    state.apply(Finished())
    return state


def notebook(bundle: dict[str, object]) -> dict[str, Any]:
    def markdown(n: int) -> dict[str, Any]:
        text = f"## Section {n}\n\n" + "Some notes about this step of the experiment. " * 20
        return {"cell_type": "markdown", "id": f"m{n}", "metadata": {}, "source": text}

    output = {"output_type": "display_data", "metadata": {}, "data": bundle}
    result = code_cell("%%remote\npython train.py", [output], execution_count=1, id="run")
    return ipynb([markdown(0), markdown(1), result, *(markdown(n) for n in range(2, 12))])


def settle(page: Any, quiet: float = 1.0) -> None:
    page.wait_for_timeout(int(quiet * 1000))


TRACE_CATEGORIES = ["toplevel", "devtools.timeline", "disabled-by-default-devtools.timeline"]


def main_thread_tasks(trace: bytes) -> list[tuple[float, float]]:
    """(wall ms, CPU ms) of every task of the page's main thread, from a Chromium trace."""
    events = json.loads(trace)
    events = events.get("traceEvents", events) if isinstance(events, dict) else events
    main = {
        (e["pid"], e["tid"])
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name" and e["args"].get("name") == "CrRendererMain"
    }
    return [
        (e["dur"] / 1000, e.get("tdur", e["dur"]) / 1000)
        for e in events
        if e.get("ph") == "X" and e.get("name") == "RunTask" and (e["pid"], e["tid"]) in main
    ]


def phase(page: Any, action: Any) -> dict[str, Any]:
    """One action's frames and tasks: wall clock from the page, CPU time from a trace (the
    machine is shared: a task's CPU time is what the page cost, its wall time what it waited)."""
    browser = page.context.browser
    browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
    page.evaluate(RESET_JS)
    began = time.monotonic()
    action()
    took = time.monotonic() - began
    settle(page)
    row = page.evaluate(READ_JS)
    tasks = main_thread_tasks(browser.stop_tracing())
    row["action_s"] = round(took, 3)
    row["longest_task_cpu_ms"] = round(max((cpu for _, cpu in tasks), default=0.0), 1)
    row["tasks_over_50ms_cpu"] = sum(1 for _, cpu in tasks if cpu > 50)
    return row


def toggle(out: Any, text: str, on: bool) -> Any:
    which = ".jp-MonarchRun-diffToggle" if text == "diff to majority" else ".jp-MonarchRun-filter"
    box = out.locator(f"{which} input")
    return lambda: box.set_checked(on)


def scroll(page: Any) -> dict[str, Any]:
    before = page.evaluate(SCROLLER_JS)
    page.mouse.move(700, 500)
    for _ in range(12):
        page.mouse.wheel(0, 600)
        page.wait_for_timeout(50)
    down = page.evaluate(SCROLLER_JS)
    for _ in range(12):
        page.mouse.wheel(0, -600)
        page.wait_for_timeout(50)
    return {"scrolled_px": down - before}


def measure(page: Any, name: str) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    page.evaluate(RESET_JS)

    def open_it() -> None:
        page.evaluate("path => window.jupyterapp.commands.execute('docmanager:open', { path })", name)
        page.locator(".jp-MonarchRun-rank").first.wait_for()

    rows["open"] = phase(page, open_it)
    rows["render"] = phase(page, lambda: page.evaluate(RENDER_JS))
    out = page.locator(".jp-MonarchRun").first
    out.locator(".jp-MonarchRun-command").click()  # the cell made active: JupyterLab's work, not a toggle's
    settle(page)
    if out.locator(".jp-MonarchRun-diffToggle").count():
        for label, (text, on) in {
            "failing": ("failing only", True),
            "all": ("failing only", False),
            "diff": ("diff to majority", True),
            "diff+failing": ("failing only", True),
            "diff off": ("diff to majority", False),
        }.items():
            rows[label] = phase(page, toggle(out, text, on))
        out.locator(".jp-MonarchRun-filter input").set_checked(False)
    moved: dict[str, Any] = {}
    rows["scroll"] = phase(page, lambda: moved.update(scroll(page)))
    rows["scroll"].update(moved)

    def paste() -> None:
        before = page.locator(".jp-MonarchRun").count()
        page.locator(".jp-Cell").nth(2).locator(".jp-InputPrompt").click()
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:copy-cell')")
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:paste-cell-below')")
        page.wait_for_function(f"() => document.querySelectorAll('.jp-MonarchRun').length > {before}")

    rows["paste"] = phase(page, paste)
    return rows


def bench(root: Path, home: Path, files: dict[str, int], repeat: int) -> dict[str, list[dict[str, Any]]]:
    tag = new_tag()
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in files}
    expose = ("--LabApp.expose_app_in_browser=True",)
    try:
        with jupyter_server(root, home, tag, LAB, expose) as server, chromium(tag) as browser:
            for _ in range(repeat):
                for name in files:
                    page = new_page(browser, 180_000)
                    page.add_init_script(PERF_JS)
                    page.goto(f"{server.url}/lab?reset&token={server.token}")
                    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell")
                    page.evaluate("() => window.jupyterapp.restored")
                    settle(page, 2.0)
                    results[name].append(measure(page, name))
                    page.close()
    finally:
        reap(tag)
    return results


def worst(rows: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per phase, the largest of each figure over the repeats."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        for phase_name, figures in row.items():
            into = out.setdefault(phase_name, {})
            for key, value in figures.items():
                into[key] = max(into.get(key, value), value)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--case", nargs="+", choices=["agree", "distinct"], default=["agree", "distinct"])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--baseline", action="store_true", help="also a 2-rank payload: Lab's own cost")
    parser.add_argument("--json", action="store_true", help="one JSON line per payload")
    options = parser.parse_args()
    if not (BUILT / "package.json").is_file():
        sys.exit("no build: cd labextension && jlpm build:prod")
    folder = Path(tempfile.mkdtemp(prefix="bench-render-"))
    try:
        root = folder / "root"
        root.mkdir()
        files: dict[str, tuple[int, str, int, int]] = {}
        sizes = [(2, "agree")] if options.baseline else []
        sizes += [(n, case) for n in options.ranks for case in options.case]
        for ranks, case in sizes:
            bundle = run_state(ranks, options.seconds, case).mime_bundle()
            name = f"run-{ranks}-{case}.ipynb"
            (root / name).write_text(json.dumps(notebook(bundle)))
            payload = len(json.dumps(bundle["application/vnd.monarch.remote+json"]))
            files[name] = (ranks, case, payload, (root / name).stat().st_size)
        results = bench(root, folder / "jupyter", {name: v[0] for name, v in files.items()}, options.repeat)
        for name, (ranks, case, payload, size) in files.items():
            row = {"ranks": ranks, "case": case, "payload_bytes": payload, "notebook_bytes": size}
            row["phases"] = worst(results[name])
            if options.json:
                print(json.dumps(row), flush=True)
                continue
            print(f"{ranks} ranks, {case}: payload {payload / 1e6:.2f} MB, notebook {size / 1e6:.2f} MB")
            for phase_name, f in row["phases"].items():
                extra = f" scrolled {f['scrolled_px']} px" if "scrolled_px" in f else ""
                print(
                    f"  {phase_name:13s} longest frame {f['longest_frame_ms']:6.1f} ms, "
                    f"{f['frames_over_50ms']} frames > 50 ms, {f['long_tasks']} long tasks "
                    f"(longest {f['longest_task_ms']:.0f} ms; CPU {f['longest_task_cpu_ms']:.0f} ms, "
                    f"{f['tasks_over_50ms_cpu']} over 50 ms), renderer {f['renderer_nodes']} nodes, "
                    f"document {f['document_nodes']}{extra}"
                )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
