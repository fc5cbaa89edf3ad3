"""The package has no import circles: not between modules, not between packages, counting every import statement
(at module top, inside functions, under `if TYPE_CHECKING`). Built-in environment families are imported by the
registry from `module:object` strings (the way entry points are), which is not an edge: that is the plugin seam."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "loop_agents"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the loop_agents modules it imports (`from a.b import c` counts a.b, and a.b.c if c is a module)."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            edges[name].update(t for t in targets if t in modules and t != name)
        edges.setdefault(name, set())
    return edges


def package_of(module: str) -> str:
    """`loop_agents.envs.appworld.host.zygote` -> `envs.appworld` (a family's package is its own); top-level
    modules are their own package."""
    parts = module.split(".")[1:]
    if len(parts) >= 2 and (ROOT / parts[0] / parts[1]).is_dir():
        return ".".join(parts[:2])
    return parts[0] if parts else "loop_agents"


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan), or a node importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in edges.get(node, ()):
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_circle_between_modules():
    assert cycles(import_graph()) == []


def test_no_circle_between_packages():
    packages: dict[str, set[str]] = defaultdict(set)
    for module, targets in import_graph().items():
        packages[package_of(module)].update(
            package_of(t) for t in targets if package_of(t) != package_of(module)
        )
    assert cycles(packages) == []


def test_eval_depends_on_envs_and_a_small_core_never_on_orchestration():
    eval_imports = {package_of(t) for m, ts in import_graph().items() if package_of(m) == "eval" for t in ts}
    assert "orchestration" not in eval_imports and "checkpoint_eval" not in eval_imports, eval_imports


def test_the_episode_runner_sits_below_every_environment():
    """rollout/ (the runner, agents, the Environment protocol it consumes: rollout/environment.py) imports no
    environment family and no envs/ module; the families import rollout's types, one way only."""
    rollout_imports = {
        t
        for m, ts in import_graph().items()
        if package_of(m) == "rollout"
        for t in ts
        if package_of(t) != "rollout"
    }
    assert not {t for t in rollout_imports if t.startswith("loop_agents.envs")}, rollout_imports


def test_the_detector_sees_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
