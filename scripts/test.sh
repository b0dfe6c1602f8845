#!/usr/bin/env bash
# Set up, then run the whole test suite: the labextension's lint and TypeScript tests, ruff
# (lint + format check) over the Python tree, then
# unit tests, real-kernel/real-worker integration tests, browser tests (JupyterLab
# in Debian's Chromium) and the notebooks under nbval. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export MONARCH_JUPYTER_BROWSER_TESTS=${MONARCH_JUPYTER_BROWSER_TESTS:-1}
bash scripts/setup.sh

echo "test: labextension (eslint, prettier, tsc on run.js, then jest)"
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

echo "test: python (pytest)"
exec .venv/bin/python -m pytest tests --nbval notebooks \
  --nbval-sanitize-with notebooks/nbval_sanitize.cfg "$@"
