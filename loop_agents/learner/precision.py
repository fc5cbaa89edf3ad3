"""Compute precision of the learner's forward passes: fp32, or bf16 autocast where the device has bf16 units.

`precision=bf16` runs every policy forward under `torch.autocast(device, bfloat16)` (matmuls and attention
in bf16, reductions and the log-softmax in fp32; the weights, LoRA masters and optimizer state stay as
`dtype` says). On CPUs this pays only with bf16 instructions (Intel AMX-BF16 / AVX512-BF16): without them
autocast emulates bf16 and is slower than fp32, so `bf16` there falls back to fp32 with one logged line,
and `auto` picks bf16 exactly when the device reports support.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

log = logging.getLogger(__name__)

CPU_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_bf16_flags(cpuinfo: str) -> set[str]:
    """The bf16 instruction flags (CPU_BF16_FLAGS) listed in a /proc/cpuinfo text."""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.partition(":")[2].split())
    return flags & set(CPU_BF16_FLAGS)


def cpu_has_bf16(cpuinfo_path: str = "/proc/cpuinfo") -> bool:
    """True when the CPU reports AMX-BF16 or AVX512-BF16 (False where /proc/cpuinfo is unreadable)."""
    try:
        return bool(cpu_bf16_flags(Path(cpuinfo_path).read_text()))
    except OSError:
        return False


def computes_in_bf16(precision: str, device: torch.device, has_bf16: bool | None = None) -> bool:
    """Whether `precision` (fp32 | bf16 | auto) resolves to bf16 on `device`: not fp32, and the device has bf16.

    `has_bf16` overrides the device probe (CPU: /proc/cpuinfo flags; CUDA: torch.cuda.is_bf16_supported)."""
    if precision == "fp32":
        return False
    if has_bf16 is None:
        has_bf16 = torch.cuda.is_bf16_supported() if device.type == "cuda" else cpu_has_bf16()
    return has_bf16


def autocast_dtype(precision: str, device: torch.device, has_bf16: bool | None = None) -> torch.dtype | None:
    """bfloat16 when the forward should run under bf16 autocast (`computes_in_bf16`), None for fp32."""
    if precision == "fp32":
        return None
    if computes_in_bf16(precision, device, has_bf16):
        log.info("learner.precision=%s: forward passes under bf16 autocast on %s", precision, device.type)
        return torch.bfloat16
    level = logging.WARNING if precision == "bf16" else logging.INFO
    log.log(
        level,
        "learner.precision=%s: this %s has no bf16 support (%s): computing in fp32",
        precision,
        device.type,
        "no " + "/".join(CPU_BF16_FLAGS) + " in /proc/cpuinfo"
        if device.type == "cpu"
        else "bf16 unsupported",
    )
    return None
