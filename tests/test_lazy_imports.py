"""Imports sit at the top of their module; the exceptions, each with its reason, are listed in one place:
loop_agents/lazy_imports.py. Counts every import statement inside a function (nested functions and classes
in a function too), as tests/test_import_graph.py does."""

from __future__ import annotations

import ast
from pathlib import Path

from loop_agents.lazy_imports import LAZY_INTERNAL, LAZY_MODULES, allowed_lazy

ROOT = Path(__file__).resolve().parents[1] / "loop_agents"

# files other sessions are rewriting under issue 42 (they hoist their imports when they land): path prefix -> why.
# An entry whose files no longer import anything unlisted inside a function fails the last test: remove it.
NOT_YET_HOISTED: dict[str, str] = {
    "loop_agents/envs/appworld/data_builder/": "being edited (AppWorld hard tier)",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports_in_functions(node: ast.AST, in_function: bool = False):
    """Each import statement under `node` that sits inside a function."""
    for child in ast.iter_child_nodes(node):
        if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        yield from _imports_in_functions(
            child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
        )


def function_level_imports() -> list[tuple[str, str, int, str]]:
    """(file relative to the repository, importing module, line, imported module) for each import in a function."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        importer = _module_name(path)
        relative = path.relative_to(ROOT.parent).as_posix()
        for node in _imports_in_functions(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.extend((relative, importer, node.lineno, alias.name) for alias in node.names)
            else:
                found.append(
                    (relative, importer, node.lineno, _absolute(node, importer, path.name == "__init__.py"))
                )
    return found


def _pending(relative: str) -> bool:
    return any(relative.startswith(prefix) for prefix in NOT_YET_HOISTED)


def test_every_import_inside_a_function_is_listed_in_lazy_imports():
    unlisted = [
        f"{relative}:{line} imports {module} inside a function"
        for relative, importer, line, module in function_level_imports()
        if not allowed_lazy(importer, module) and not _pending(relative)
    ]
    assert not unlisted, (
        "move these imports to the top of their module, or list the module with its reason in "
        "loop_agents/lazy_imports.py (LAZY_MODULES for a third-party one, LAZY_INTERNAL for ours):\n"
        + "\n".join(unlisted)
    )


def test_every_listed_module_is_imported_lazily_somewhere():
    imports = function_level_imports()
    third_party = {
        module.split(".")[0] for _, _, _, module in imports if not module.startswith("loop_agents")
    }
    internal = {(importer, module) for _, importer, _, module in imports if module.startswith("loop_agents")}
    unused = sorted(set(LAZY_MODULES) - third_party) + [
        f"{importer} -> {module}" for importer, module in sorted(set(LAZY_INTERNAL) - internal)
    ]
    assert not unused, (
        f"listed in loop_agents/lazy_imports.py but imported at module top everywhere: {unused}"
    )


def test_internal_exceptions_name_real_modules():
    modules = {_module_name(path) for path in ROOT.rglob("*.py")}
    wrong = [pair for pair in LAZY_INTERNAL if not set(pair) <= modules]
    assert not wrong, f"LAZY_INTERNAL names modules that do not exist: {wrong}"


def test_not_yet_hoisted_entries_are_still_needed():
    imports = function_level_imports()
    done = [
        prefix
        for prefix in NOT_YET_HOISTED
        if not any(
            relative.startswith(prefix) and not allowed_lazy(importer, module)
            for relative, importer, _, module in imports
        )
    ]
    assert not done, (
        f"these files import nothing unlisted inside a function any more: drop them from NOT_YET_HOISTED: {done}"
    )
