#!/usr/bin/env bash
# Set up .venv with monarch_jupyter and its test tools, from the package registries only.
# Safe to run again: it reuses .venv and reinstalls the package from this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
if [ "${MONARCH_JUPYTER_BROWSER_TESTS:-0}" = 1 ] && [ ! -x /usr/bin/chromium ]; then
  need_apt+=(chromium)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${need_apt[*]} from Debian"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: please install ${need_apt[*]} (Debian: apt-get install ${need_apt[*]})" >&2
    exit 1
  fi
fi

# Real daemons for the cluster tests (tests/daemons.py): sshd and a single-node Slurm on loopback.
need_daemons=()
[ -x /usr/sbin/sshd ] || need_daemons+=(openssh-server)
[ -x /usr/sbin/slurmctld ] || need_daemons+=(slurmctld)
[ -x /usr/sbin/slurmd ] || need_daemons+=(slurmd)
command -v sbatch >/dev/null 2>&1 || need_daemons+=(slurm-client)
# FUSE's fusermount3, for `%job apply --mount/--gather` (Monarch's remote_mount / gather_mount).
command -v fusermount3 >/dev/null 2>&1 || need_daemons+=(fuse3)
if [ ${#need_daemons[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${need_daemons[*]} from Debian (for the SSH, Slurm and mount tests)"
    [ ${#need_apt[@]} -gt 0 ] || apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_daemons[@]}" >/dev/null
  else
    echo "setup: the SSH, Slurm and mount tests need ${need_daemons[*]} (Debian: apt-get install --no-install-recommends ${need_daemons[*]})" >&2
  fi
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
echo "setup: installing monarch_jupyter and test tools into .venv (first time: a few minutes)"
# the development tools are PEP 735 dependency groups (pyproject.toml), which pip reads from 25.1 on
if ! .venv/bin/python -m pip install --disable-pip-version-check --quiet "pip>=25.1" >.venv/pip-upgrade.log 2>&1; then
  tail -20 .venv/pip-upgrade.log >&2
  echo "setup: upgrading pip failed (full log: .venv/pip-upgrade.log)" >&2
  exit 1
fi
if ! .venv/bin/python -m pip install --disable-pip-version-check --group dev ".[server]" >.venv/pip-install.log 2>&1; then
  grep -v "^WARNING: Location .* is ignored" .venv/pip-install.log | tail -40 >&2
  echo "setup: pip install failed (full log: .venv/pip-install.log)" >&2
  exit 1
fi
.venv/bin/python -c "import monarch_jupyter, monarch" \
  || { echo "setup: install failed" >&2; exit 1; }
echo "setup: done ($(.venv/bin/python -c 'import monarch_jupyter as m; print("monarch_jupyter", m.__version__)'))"
