#!/usr/bin/env bash
# Set up, then run the whole test suite: the labextension's lint and TypeScript tests, ruff
# (lint + format check) over the Python tree, mypy and the import contracts over the package, the
# docs site (Sphinx, warnings as errors), then
# tests/unit, tests/integration (real kernels and workers, sshd and Slurm, browser tests in
# Debian's Chromium) and the notebooks under nbval. Extra arguments go to pytest; the quick set
# alone is `.venv/bin/python -m pytest -m "not kernel and not daemon and not browser" tests`.
set -euo pipefail
cd "$(dirname "$0")/.."
export MONARCH_JUPYTER_BROWSER_TESTS=${MONARCH_JUPYTER_BROWSER_TESTS:-1}
bash scripts/setup.sh

echo "test: labextension (eslint, prettier, tsc on widgets/, then jest)"
(cd labextension && ../.venv/bin/jlpm install --immutable >/dev/null && ../.venv/bin/jlpm lint:check \
  && ../.venv/bin/jlpm test --silent)

echo "test: python lint (ruff check, ruff format --check; config in pyproject.toml)"
if ! .venv/bin/ruff check .; then
  echo "test: FAILED: ruff check found problems (see above); '.venv/bin/ruff check --fix .' fixes the safe ones" >&2
  exit 1
fi
if ! .venv/bin/ruff format --check .; then
  echo "test: FAILED: files above are not ruff-formatted; run '.venv/bin/ruff format .'" >&2
  exit 1
fi

echo "test: python types (mypy; config in pyproject.toml)"
if ! .venv/bin/mypy; then
  echo "test: FAILED: mypy found type errors (see above)" >&2
  exit 1
fi

echo "test: import contracts (lint-imports: no cycles, remote's layers, host side; config in pyproject.toml)"
if ! .venv/bin/lint-imports; then
  echo "test: FAILED: an import breaks a contract in pyproject.toml [tool.importlinter] (see above)" >&2
  exit 1
fi

echo "test: docs (sphinx-build -W -n: a broken reference, link, anchor or include fails; config in docs/conf.py)"
if ! .venv/bin/sphinx-build -W --keep-going -n -q -b html docs docs/_build/html; then
  echo "test: FAILED: the docs do not build cleanly (see above)" >&2
  exit 1
fi

echo "test: python (pytest: tests/unit, tests/integration, notebooks)"
# --durations: the slowest tests in every log, so a run that got slower says where
exec .venv/bin/python -m pytest tests/unit tests/integration --nbval notebooks \
  --nbval-sanitize-with notebooks/nbval_sanitize.cfg --durations=15 "$@"
