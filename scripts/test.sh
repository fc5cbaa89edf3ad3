#!/usr/bin/env bash
# Run the test suite exactly as CI does: install (idempotent), lint, results and config-reference checks, docs
# build (strict), lock check, pytest.
#   bash scripts/test.sh [pytest args...]
#   bash scripts/test.sh --fast [pytest args...]   # quick feedback: lint, then the tests not marked slow (no vLLM,
#                                                  # AppWorld, env server, Ray or multi-rank launch); installs only
#                                                  # if ./.venv is missing. CI runs the full suite (no --fast).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == --fast ]]; then
  shift
  [[ -x .venv/bin/python ]] || bash scripts/install.sh cpu
  [[ -x .venv/bin/mkdocs ]] || bash scripts/install.sh cpu  # a venv from before the docs tools joined the dev extra
  .venv/bin/ruff check .
  .venv/bin/ruff format --check .
  .venv/bin/python -m benchmarks.render --check  # the results pages agree with benchmarks/results/<name>.json
  .venv/bin/python -m loop_agents.config.reference --check  # docs/reference/configuration.md agrees with the schema
  NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$(mktemp -d)"  # docs: a broken link or orphan page fails
  export WANDB_MODE=offline RAY_USAGE_STATS_ENABLED=0 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
  exec .venv/bin/python -m pytest -m "not slow" --durations=15 "$@"
fi
bash scripts/install.sh cpu
# System packages some tests need: Java for ScienceWorld (the AgentGym sciworld tests fail without it) and
# Debian's chromium for the headless-browser view tests (skipped without it). CI installs what is missing.
if [[ "${CI:-}" == true ]] && [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
  missing=()
  command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
  command -v chromium >/dev/null || missing+=(chromium)
  if (( ${#missing[@]} )); then
    apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"; }
    { apt_install || { apt-get update -q && apt_install; }; } >/dev/null 2>&1 \
      || echo "[test] could not apt-get install ${missing[*]}" >&2
  fi
fi
if [[ -f scripts/install_appworld.sh ]]; then bash scripts/install_appworld.sh; fi
if [[ -f scripts/install_openenv.sh ]]; then bash scripts/install_openenv.sh; fi  # OpenEnv 0.10: serve <family>, its tests
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m benchmarks.render --check  # the results pages agree with benchmarks/results/<name>.json
.venv/bin/python -m loop_agents.config.reference --check  # docs/reference/configuration.md agrees with the schema
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$(mktemp -d)"  # docs: a broken link or orphan page fails
if [[ ! -x .venv-poetry/bin/poetry ]]; then
  python3.11 -m venv .venv-poetry && .venv-poetry/bin/pip install -q "poetry==2.*"
fi
.venv-poetry/bin/poetry check --lock
export WANDB_MODE=offline RAY_USAGE_STATS_ENABLED=0 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
# --durations: CI's log shows which tests dominate its 90-minute budget.
exec .venv/bin/python -m pytest --durations=30 "$@"
