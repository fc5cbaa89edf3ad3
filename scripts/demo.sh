#!/usr/bin/env bash
# The CPU demo: install if needed, then LOOP on the bundled environment with the tiny model.
#   bash scripts/demo.sh [hydra overrides...]     e.g. run.seed=1 run.iterations=10
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh cpu
export WANDB_MODE="${WANDB_MODE:-offline}" RAY_USAGE_STATS_ENABLED=0 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
exec .venv/bin/python -m loop_agents.train experiment=demo "$@"
