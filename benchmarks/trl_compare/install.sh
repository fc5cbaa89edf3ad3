#!/usr/bin/env bash
# Install TRL (the peer the `trl_compare` benchmark measures against) into its own venv, .venv-trl,
# so its pins never touch the project's .venv. One command:  bash benchmarks/trl_compare/install.sh
# CPU: torch comes from the PyTorch CPU index (or PIP_FIND_LINKS where a local CPU wheel is kept);
# the other versions are those of the project's own stack, so both sides run the same kernels.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
VENV="${TRL_VENV:-$ROOT/.venv-trl}"
PY="${PYTHON:-python3.11}"
# Where the CPU torch wheel comes from: the PyTorch CPU index, unless PIP_FIND_LINKS already holds it
# (as on the project's CI machines, where download.pytorch.org is not reachable).
if [ -n "${PIP_FIND_LINKS:-}" ] && [ -z "${TORCH_INDEX+x}" ]; then TORCH_INDEX=""; fi
TORCH_INDEX="${TORCH_INDEX-https://download.pytorch.org/whl/cpu}"
EXTRA=()
if [ -n "$TORCH_INDEX" ]; then EXTRA=(--extra-index-url "$TORCH_INDEX"); fi

"$PY" -m venv "$VENV"
# torch first, pinned to the CPU build, so nothing below can pull a CUDA build in
"$VENV/bin/python" -m pip install --quiet "torch==2.13.0" "${EXTRA[@]}"
"$VENV/bin/python" -m pip install --quiet \
    "trl==1.16.0" "transformers==5.19.0" "peft==0.21.2" "accelerate==1.15.0" "datasets" \
    "tokenizers==0.23.3" "torch==2.13.0" "${EXTRA[@]}"
# the benchmark imports loop_agents.tiny_model (pure transformers/tokenizers) from the source tree
"$VENV/bin/python" -c "import trl, transformers, torch, peft; print('trl', trl.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__, 'peft', peft.__version__)"
