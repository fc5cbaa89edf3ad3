"""Which OpenEnv our server runs on, and the one line said when the installed one is not it.

`serve` runs OpenEnv's own server code in `.venv-openenv` (scripts/install_openenv.sh pins the `openenv`
distribution there); a Python whose OpenEnv is another version (or the older `openenv-core`) is refused at start,
before anything is served. `$LOOP_AGENTS_OPENENV_PYTHON` names another interpreter than `.venv-openenv/bin/python`.

Standard library and `packaging` only: both venvs import this module.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

SUPPORTED_RANGE = ">=0.10,<0.11"  # of the `openenv` distribution; install_openenv.sh pins 0.10.0
SUPPORTED = SpecifierSet(SUPPORTED_RANGE)
REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_PYTHON = REPO_ROOT / ".venv-openenv" / "bin" / "python"
INSTALL_HINT = "bash scripts/install_openenv.sh makes .venv-openenv with openenv 0.10.0"


def openenv_python() -> Path:
    """The interpreter that runs OpenEnv's server: $LOOP_AGENTS_OPENENV_PYTHON, else .venv-openenv's."""
    return Path(os.environ.get("LOOP_AGENTS_OPENENV_PYTHON") or DEFAULT_PYTHON)


def installed_openenv() -> tuple[str, str] | None:
    """(distribution, version) of the OpenEnv this interpreter imports, or None."""
    for distribution in ("openenv", "openenv-core"):
        try:
            return distribution, version(distribution)
        except PackageNotFoundError:
            continue
    return None


def version_problem(found: tuple[str, str] | None) -> str | None:
    """One line naming the OpenEnv found and the range we support, or None when it is supported."""
    where = f"in {sys.prefix}"
    if found is None:
        return f"no OpenEnv installed {where}; loop_agents' OpenEnv server needs openenv {SUPPORTED_RANGE} ({INSTALL_HINT})"
    distribution, text = found
    try:
        supported = distribution == "openenv" and Version(text) in SUPPORTED
    except InvalidVersion:
        supported = False
    if supported:
        return None
    return (f"OpenEnv {distribution} {text} found {where}; loop_agents' OpenEnv server supports openenv {SUPPORTED_RANGE} "
            f"({INSTALL_HINT})")  # fmt: skip
