"""Ray hook `ray_token_auth`: a driver that joins a cluster by address uses Ray's token auth where a token exists.

What: calls `ray._private.authentication.authentication_token_setup.maybe_enable_token_auth_if_token_available`
(private Ray API) before `ray.init(address=...)`.
Why: `ray start --head` turns Ray's token auth on, and `ray.init` turns it on by itself only for
address="auto"; with an explicit address the driver must use the token Ray keeps ($RAY_AUTH_TOKEN or
~/.ray/auth_token) the same way, unless $RAY_AUTH_MODE says otherwise. The token is never read or printed here.
Written for: ray 2.60.0 (the pinned version).
On a mismatch (another Ray, or the function moved): one warning line, and the driver joins without it. That fails
closed: a cluster that wants a token refuses the driver with Ray's own error (set RAY_AUTH_MODE=token then); a
cluster without token auth is joined as before.
"""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import PackageNotFoundError, version

NAME = "ray_token_auth"
KNOWN_VERSIONS = ("2.60.0",)
MODULE = "ray._private.authentication.authentication_token_setup"
FUNCTION = "maybe_enable_token_auth_if_token_available"


def _installed_ray() -> str | None:
    try:
        return version("ray")
    except PackageNotFoundError:
        return None


def mismatch(installed: str | None) -> str | None:
    """Why the hook cannot run on this Ray, or None."""
    if installed not in KNOWN_VERSIONS:
        return f"this is ray {installed or '(not installed)'}"
    try:
        module = importlib.import_module(MODULE)
    except ImportError:
        return f"its target module {MODULE} is missing"
    if not callable(getattr(module, FUNCTION, None)):
        return f"{MODULE} has no {FUNCTION}"
    return None


def use_ray_token_if_available(installed: str | None = None) -> bool:
    """Run the hook (True), or say in one line why not and return False."""
    problem = mismatch(installed or _installed_ray())
    if problem is not None:
        print(
            f"[loop_agents] warning: Ray hook {NAME} knows ray {', '.join(KNOWN_VERSIONS)} and {problem}: "
            "joining without it (set RAY_AUTH_MODE=token if the cluster wants Ray's token)",
            file=sys.stderr,
            flush=True,
        )
        return False
    getattr(importlib.import_module(MODULE), FUNCTION)(warn_if_disabled=False)
    return True
