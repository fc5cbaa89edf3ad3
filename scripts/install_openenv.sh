#!/usr/bin/env bash
# Create ./.venv-openenv: OpenEnv as people install it now (the `openenv` distribution 0.10.0) and nothing else.
#   bash scripts/install_openenv.sh
# Why a second venv: openenv 0.10.0 requires fastmcp>=3,<4, every fastmcp 3.x requires mcp<2, and vLLM 0.32 (the
# main venv) requires mcp>=2,<3, so the two cannot share one environment (docs/environments/openenv.md).
# `python -m loop_agents.envs.openenv serve <family>` runs OpenEnv's own server code here, over our family in the
# main venv; the tests run OpenEnv's own client classes here against it.
# Registry-only, every package pinned (scripts/openenv-constraints.txt). Idempotent: a venv that already imports
# openenv 0.10.0 is left as it is. Options (environment): PYTHON=python3.11, OPENENV_VENV=.venv-openenv.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
VENV="${OPENENV_VENV:-.venv-openenv}"
OPENENV_VERSION="0.10.0"
CONSTRAINTS="scripts/openenv-constraints.txt"
start=$(date +%s)

installed_ok() {
  [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" - "$OPENENV_VERSION" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version

import fastmcp  # noqa: F401 - the MCP server our served families' tools run on
from openenv.core.env_server.mcp_environment import MCPEnvironment  # noqa: F401
from openenv.core.mcp_client import MCPToolClient  # noqa: F401

assert version("openenv") == sys.argv[1], version("openenv")
EOF
}

if installed_ok; then
  echo "[install_openenv] $VENV already has openenv $OPENENV_VERSION"
  exit 0
fi

LABEL=install_openenv
# shellcheck source=scripts/side_venv.sh
source scripts/side_venv.sh
echo "[install_openenv] upgrading pip in $VENV"
pip_step "$LOGS/pip-upgrade.log" install --upgrade pip
echo "[install_openenv] openenv $OPENENV_VERSION and its dependencies, pinned by $CONSTRAINTS (pip's output: $LOGS/pip-openenv.log)"
pip_step "$LOGS/pip-openenv.log" install "openenv==$OPENENV_VERSION" -c "$CONSTRAINTS"
installed_ok || { echo "[install_openenv] openenv did not install correctly into $VENV" >&2; exit 1; }
echo "[install_openenv] done in $(( $(date +%s) - start )) s; venv size $(du -sh "$VENV" | cut -f1)"
