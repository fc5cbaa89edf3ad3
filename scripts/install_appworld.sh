#!/usr/bin/env bash
# Create the isolated AppWorld venv ./.venv-appworld and unpack AppWorld's app sources.
#   bash scripts/install_appworld.sh
# AppWorld 0.1.3.post1 needs pydantic v1, fastapi 0.110 and SQLAlchemy 1.4, which conflict with the main
# venv, so it lives in its own venv and is only ever driven over HTTP (see loop_agents/envs/appworld).
# Registry-only and offline-safe: `appworld install` unpacks bundles shipped inside the wheel.
# Idempotent: a venv that already imports appworld with unpacked apps is left as it is.
# Options (environment): PYTHON=python3.11, APPWORLD_VENV=.venv-appworld,
#   APPWORLD_CACHE (default <venv>/appworld-cache: where `appworld install` puts its test bundle).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
VENV="${APPWORLD_VENV:-.venv-appworld}"
export APPWORLD_CACHE="${APPWORLD_CACHE:-$PWD/$VENV/appworld-cache}"
APPWORLD_VERSION="0.1.3.post1"
# The episode sandbox's in-process layers (loop_agents/sandbox): Landlock and seccomp bindings (pure Python,
# ctypes; seccomp needs the system's libseccomp.so.2). Pinned: landlock has only dev releases.
SANDBOX_PACKAGES=("landlock==1.0.0.dev5" "pyseccomp==0.1.2")
start=$(date +%s)

installed_ok() {
  [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" - "$APPWORLD_VERSION" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
from pathlib import Path

import appworld
import landlock  # noqa: F401 - the sandbox layers (loop_agents/sandbox/layers.py)
import pyseccomp  # noqa: F401

assert version("appworld") == sys.argv[1], version("appworld")
# `appworld install` unpacks the app packages next to appworld/__init__.py.
assert (Path(appworld.__file__).parent / "apps" / "spotify" / "apis.py").exists()
EOF
}

if installed_ok; then
  echo "[install_appworld] $VENV already has appworld $APPWORLD_VERSION installed and unpacked"
  exit 0
fi

LABEL=install_appworld
# shellcheck source=scripts/side_venv.sh
source scripts/side_venv.sh
echo "[install_appworld] upgrading pip in $VENV"
pip_step "$LOGS/pip-upgrade.log" install --upgrade pip
# click 8.2.1 is the version AppWorld's own lock uses; newer clicks work but the pin is harmless.
echo "[install_appworld] appworld $APPWORLD_VERSION, click, the sandbox's ${SANDBOX_PACKAGES[*]} and their dependencies" \
  "(pip's output: $LOGS/pip-appworld.log)"
pip_step "$LOGS/pip-appworld.log" install "appworld==$APPWORLD_VERSION" "click==8.2.1" "${SANDBOX_PACKAGES[@]}"
mkdir -p "$APPWORLD_CACHE"
echo "[install_appworld] unpacking AppWorld's app sources from the wheel (appworld install)"
"$VENV/bin/appworld" install
echo "[install_appworld] app sources unpacked: $(du -sh "$("$VENV/bin/python" -c 'import appworld, os; print(os.path.dirname(appworld.__file__))')" | cut -f1) in the appworld package"
installed_ok || { echo "[install_appworld] appworld did not install correctly into $VENV" >&2; exit 1; }
echo "[install_appworld] done in $(( $(date +%s) - start )) s; venv size $(du -sh "$VENV" | cut -f1)"
