"""The renderer's "Diff to majority" (labextension/src/outliers.ts) is ``%%remote --diff``'s
(remote/view/diff.py): cases written here, from real ``RunState`` payloads and ``diff_text``, are
what ``labextension/src/__tests__/diff.spec.ts`` checks the TypeScript port against.

    PYTHONPATH=. python tests/unit/test_diff_parity.py   # rewrites the cases after a change
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from monarch_jupyter.remote.view.diff import diff_text
from monarch_jupyter.remote.view.model import (
    ERR,
    OUT,
    Exited,
    Finished,
    Output,
    RankState,
    RunState,
    Started,
)

CASES = Path(__file__).resolve().parents[2] / "labextension" / "src" / "__tests__" / "diff-cases.json"


def _state(
    outputs: list[list[tuple[str, str]]], meshes: list[tuple[str, dict[str, int]]] | None = None
) -> RunState:
    where = meshes or [("hosts", {"hosts": i}) for i in range(len(outputs))]
    ranks = [
        RankState(label=",".join(f"{k}={v}" for k, v in point.items()), mesh=mesh, point=point, rank=i)
        for i, (mesh, point) in enumerate(where)
    ]
    state = RunState("cmd", "bash", "mesh hosts", ranks, started=0.0, clock=lambda: 1.0)
    for i, lines in enumerate(outputs):
        state.apply(Started(i))
        for stream, text in lines:
            state.apply(Output(i, stream, text + "\n"))
        state.apply(Exited(i, 0 if i % 3 else 1, 0.5))
    state.apply(Finished())
    return state


def _out(*texts: str) -> list[tuple[str, str]]:
    return [(OUT, t) for t in texts]


def _random_outputs(rng: random.Random) -> list[list[tuple[str, str]]]:
    base = [rng.choice("abcdefgh") for _ in range(rng.randint(0, 210))]
    outputs = []
    for _ in range(rng.randint(2, 7)):
        lines = list(base) if rng.random() < 0.6 else []
        for _ in range(rng.randint(0, 6)):  # edits: replace, insert, delete
            at = rng.randint(0, len(lines))
            op = rng.random()
            if op < 0.4 and at < len(lines):
                lines[at] = rng.choice("xyz")
            elif op < 0.7:
                lines[at:at] = [rng.choice("abxyz") for _ in range(rng.randint(1, 4))]
            else:
                del lines[at : at + rng.randint(1, 5)]
        outputs.append([(ERR if t == "z" else OUT, t) for t in lines])
    return outputs


def cases() -> list[dict]:
    grid = [("hosts", {"hosts": h, "gpus": g}) for h in range(2) for g in range(3)]
    named: dict[str, tuple[list[list[tuple[str, str]]], list | None]] = {
        "one outlier": (
            [_out("step 1", "loss 0.5", "step 2")] * 3 + [_out("step 1", "loss nan", "step 2")],
            None,
        ),
        "all the same": ([_out("same")] * 3, None),
        "no majority": ([_out("a"), _out("b"), _out("c")], None),
        "one rank": ([_out("a")], None),
        "stderr marked": ([_out("x"), _out("x"), [(OUT, "x"), (ERR, "warn")]], None),
        "tie: the first seen wins": ([_out("b"), _out("a"), _out("a"), _out("b")], None),
        "empty output": ([_out("a"), [], []], None),
        "two meshes": (
            [_out("a"), _out("a"), _out("b")],
            [("hosts", {"hosts": 0}), ("gpus", {"gpus": 0}), ("hosts", {"hosts": 1})],
        ),
        "two dimensions": ([_out("a")] * 4 + [_out("b")] * 2, grid),
        "long diff is cut": (
            [_out(*map(str, range(200)))] * 2 + [_out(*(f"x{i}" for i in range(200)))],
            None,
        ),
        "repeated lines (autojunk)": (
            [_out(*(["tick"] * 150 + ["a", "b"] * 25))] * 2
            + [_out(*(["tick"] * 149 + ["c"] + ["a", "b"] * 25))],
            None,
        ),
    }
    out = []
    for name, (outputs, meshes) in named.items():
        state = _state(outputs, meshes)
        out.append({"name": name, "payload": state.to_mime(), "diff": diff_text(state)})
    rng = random.Random(19)
    for n in range(24):
        state = _state(_random_outputs(rng))
        out.append({"name": f"random {n}", "payload": state.to_mime(), "diff": diff_text(state)})
    return out


def test_the_typescript_cases_are_current():
    assert json.loads(CASES.read_text()) == json.loads(json.dumps(cases())), (
        f"{CASES.name} is stale: PYTHONPATH=. python tests/unit/test_diff_parity.py"
    )


if __name__ == "__main__":
    CASES.write_text(json.dumps(cases(), indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {CASES}")
