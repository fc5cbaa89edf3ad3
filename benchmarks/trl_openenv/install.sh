#!/usr/bin/env bash
# The TRL venv of the trl_openenv benchmark: trl_compare's .venv-trl (TRL 1.16, same stack) plus openenv-core, the
# OpenEnv client TRL's environment path talks to our server with. One command: bash benchmarks/trl_openenv/install.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
VENV="${TRL_VENV:-$ROOT/.venv-trl}"
if [ ! -x "$VENV/bin/python" ]; then bash "$ROOT/benchmarks/trl_compare/install.sh"; fi
"$VENV/bin/python" -m pip install --quiet "openenv-core==0.3.0"
"$VENV/bin/python" -c "import trl, openenv.core; print('trl', trl.__version__, '+ openenv-core')"
