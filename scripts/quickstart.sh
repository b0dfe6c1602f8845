#!/usr/bin/env bash
# Set up, then run notebooks/quickstart.ipynb headless against a local Monarch job,
# printing each cell and its output (streamed live) in this terminal.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/run_notebook.py notebooks/quickstart.ipynb "$@"
