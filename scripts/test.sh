#!/usr/bin/env bash
# Set up, then run the whole test suite: unit tests, real-kernel/real-worker
# integration tests, and the notebooks under nbval. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest tests --nbval notebooks \
  --nbval-sanitize-with notebooks/nbval_sanitize.cfg "$@"
